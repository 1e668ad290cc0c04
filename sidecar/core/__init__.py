"""The core: taxonomy, classification and policy. Knows nothing of gRPC."""
