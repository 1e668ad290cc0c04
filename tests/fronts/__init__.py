"""The doors: the HTTP fronts (OpenAI, Anthropic, MCP), the gRPC port and its Python client, the admin
door, and hostile, slow or fuzzed input at each."""
