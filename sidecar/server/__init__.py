"""The serving process and its two doors: ``grpc/`` (the gRPC port) and ``http/`` (the HTTP port).

Here, shared by both: the process (``app``, ``workers``, ``cores``), the in-flight limit
(``admission``), the bearer tokens and transport security (``auth``, ``security``), and the one
converter between the ``sidecar.v1`` contract and the core (``convert``).
"""
