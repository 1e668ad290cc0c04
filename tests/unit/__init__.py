"""Unit tests of pure policy and of single modules (no server, no network)."""
