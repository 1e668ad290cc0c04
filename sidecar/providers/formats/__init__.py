"""The wire formats: one folder each (``vocab``, ``upstream``, ``front``), the protocol they implement
(``protocol.WireFormat``), and the registry of them by name (``registry.FORMATS``)."""
