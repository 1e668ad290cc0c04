"""The HTTP port: doors to the same core as the gRPC port, on the same event loop.

hosting.py     uvicorn serving one Starlette app on the running loop; started and stopped with gRPC
access.py      who may call it: browsers' Origin / Host, then server.auth's bearer tokens
doors.py       which doors the port serves (the MCP front today), built from the core's services
mcp_front.py   the configured tools as an MCP server (streamable HTTP) at /mcp
tracing.py     a door's SERVER span, the caller's W3C trace context its parent
"""
