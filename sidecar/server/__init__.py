"""The gRPC adapter: a thin servicer over the core, the status carrier, and the serving process."""
