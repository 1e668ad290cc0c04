"""State backends: the fleet's shared policy state behind ``core.state.StateBackend`` (Redis today)."""
