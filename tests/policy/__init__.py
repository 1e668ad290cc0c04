"""The failure policy, through real calls or on the fake clock: retries, throttles, circuits, routes,
refusals, streams, timeouts, the taxonomy, the tool calls' mapping."""
