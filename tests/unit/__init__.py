"""Unit tests of the pure policy: one module per unit, no gRPC, no HTTP server, time on ``FakeClock``."""
