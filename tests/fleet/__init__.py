"""The fleet: several sidecars on one real Redis, the shared state, tool calls that happen once."""
