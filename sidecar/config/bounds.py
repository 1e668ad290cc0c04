"""The configuration's constants: the defaults, the bounds a value must stay within, the embedded URLs.

The bounds of the policy settings the core reads (waits, cooldowns, rates) are in
``sidecar.core.settings``.
"""

from __future__ import annotations

__all__ = [
    "CALLER_NAME",
    "DEFAULT_CHECK_TIME_LIMIT_S",
    "DEFAULT_CONFIG",
    "DEFAULT_GRACE_PERIOD_S",
    "DEFAULT_GRPC_AGE_GRACE_S",
    "DEFAULT_GRPC_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_GRPC_IDLE_TIMEOUT_S",
    "DEFAULT_GRPC_KEEPALIVE_TIMEOUT_S",
    "DEFAULT_GRPC_KEEPALIVE_TIME_S",
    "DEFAULT_GRPC_MAX_AGE_S",
    "DEFAULT_GRPC_MIN_PING_INTERVAL_S",
    "DEFAULT_HTTP_BODY_TIMEOUT_S",
    "DEFAULT_HTTP_HEAD_TIMEOUT_S",
    "DEFAULT_HTTP_IDLE_TIMEOUT_S",
    "DEFAULT_LISTEN",
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CORRECTIONS",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MCP_CONNECT_TIMEOUT_S",
    "DEFAULT_MCP_TIMEOUT_S",
    "DEFAULT_STATE_PREFIX",
    "DEFAULT_STATE_TIMEOUT_MS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "DEFAULT_TOOL_RETRIES",
    "DEFAULT_UPSTREAM_RETRIES",
    "EMBEDDED_PROVIDER",
    "EMBEDDED_TOOLS",
    "INTERACTIVE_FIRST_TOKEN_TIMEOUT_S",
    "INTERACTIVE_HEADER_TIMEOUT_S",
    "INTERACTIVE_STREAM_IDLE_TIMEOUT_S",
    "INTERACTIVE_WHOLE_REPLY_TOKENS_PER_S",
    "MAX_CALLER_RPS",
    "MAX_CALLER_TPM",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
    "MAX_CONNECTIONS_LIMIT",
    "MAX_CONNECTION_WAIT_S",
    "MAX_IN_FLIGHT_LIMIT",
    "MAX_PORT",
    "MAX_PROVIDER_CONNECTIONS",
    "MAX_STATE_TIMEOUT_MS",
    "MAX_WORKERS",
    "MIN_TOKEN_CHARS",
]

EMBEDDED_PROVIDER = "embedded://provider"
EMBEDDED_TOOLS = "embedded://tools"
DEFAULT_CONFIG = "default_config.yaml"
DEFAULT_LISTEN = "127.0.0.1:50051"
MAX_PORT = 65535
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_GRACE_PERIOD_S = 10.0
DEFAULT_MAX_IN_FLIGHT = 256
"""CallModel + ExecuteTool calls at once; past it a call is shed (RESOURCE_EXHAUSTED). Measured with
bench/overload.py (docs/configuration.md): above the default provider pool (200) by little, and low
enough that one event loop still picks every call of a 5,000-call burst up and answers it."""
MAX_IN_FLIGHT_LIMIT = 8192
"""The highest ``server.max_in_flight`` accepted: one event loop cannot serve more at once usefully."""
MIN_TOKEN_CHARS = 16
"""A bearer token shorter than this is refused (``openssl rand -hex 32`` gives 64)."""
MAX_CALLER_RPS = 100_000.0
"""The highest ``server.auth.tokens[].requests_per_second``: more than one process serves at all."""
MAX_CALLER_TPM = 1_000_000_000
"""The highest ``server.auth.tokens[].tokens_per_minute`` (a billion: past any provider's tier)."""
CALLER_NAME = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
"""A caller's name (``server.auth.tokens[].name``): a metric label and a span attribute, so short and plain."""
MAX_PROVIDER_CONNECTIONS = 1024
"""The highest ``providers.*.max_connections`` (a pool that large served nothing faster, measured with
httpcore's pool; the bound stays as a guard against a typo's ten thousand sockets)."""
DEFAULT_STATE_PREFIX = "sidecar"
DEFAULT_STATE_TIMEOUT_MS = 50
"""A state backend operation (Redis) slower than this is given up: the call decides on local state."""
MAX_STATE_TIMEOUT_MS = 10_000
MAX_WORKERS = 256
"""The most worker processes ``server.workers`` may ask for."""
DEFAULT_UPSTREAM_RETRIES = 3
DEFAULT_TOOL_RETRIES = 2
DEFAULT_MAX_CORRECTIONS = 2
MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused unread (a real one is a few KiB)."""
MAX_CONFIG_DEPTH = 64
"""Mappings and lists nested deeper than this are refused: PyYAML and the JSON-schema check recurse."""
MAX_CONFIG_NODES = 100_000
"""Scalars, mappings and lists of the document with every alias expanded: the rest is refused."""
DEFAULT_MAX_ARGUMENT_BYTES = 1024 * 1024
"""A caller's JSON text (tool arguments, a schema, a history tool call) is refused past this size."""
DEFAULT_CHECK_TIME_LIMIT_S = 2.0
"""Checking one call's input (arguments, guardrails, schemas, the reply against the schema) stops here."""
DEFAULT_STREAM_IDLE_TIMEOUT_S = 30.0
"""A StreamModel attempt that receives no byte for this many seconds (the response head included) is
a stall: a mid-stream fault after the first delta, a transient fault before it. ``preset: batch``'s (gRPC's
default); per provider (``providers.*.stream_idle_timeout_s``): raise it for a server that thinks long
before its first byte."""
INTERACTIVE_HEADER_TIMEOUT_S = 10.0
"""``preset: interactive``: a model attempt with no response head for this long is a header timeout
(a transient fault; on a route whose ``move_on`` lists EXTERNAL_SERVICE, the next deployment at once).
With ``batch`` there is none of its own: ``timeout_s`` bounds the head as it bounds every read."""
INTERACTIVE_WHOLE_REPLY_TOKENS_PER_S = 100.0
"""``preset: interactive``, CallModel (a whole reply, whose head comes only once it is generated): the
header wait is at least the request's output budget at this many tokens a second (1,024 tokens: 10.24 s;
4,096: 41 s), so a reply that asked for a long budget is not cut at 10 s while it is being generated. A
``header_timeout_s`` of the model or its provider is the wait as written."""
INTERACTIVE_FIRST_TOKEN_TIMEOUT_S = 10.0
"""``preset: interactive``: a StreamModel attempt with no content delta this long after it was sent is a
first-token timeout (as above). With ``batch``, none: ``stream_idle_timeout_s`` bounds the silence."""
INTERACTIVE_STREAM_IDLE_TIMEOUT_S = 15.0
"""``preset: interactive`` (the HTTP fronts' default): a stream silent this long is a stall. A stream that
is writing sends bytes many times a second; before its first content delta the first-token limit (10 s)
bounds the silence instead. 15 s leaves room for a provider's keep-alive pings and a long tool call's
arguments, and a stall found at 15 s, continued on a route's next deployment, still ends well inside the
45 s a waiting caller is given (docs/streaming.md)."""
DEFAULT_MCP_TIMEOUT_S = 30.0
"""One call of an MCP server's tool (an attempt) waits this long for its answer."""
DEFAULT_MCP_CONNECT_TIMEOUT_S = 10.0
"""Opening a session with an MCP server (connect or spawn, initialize, list its tools) takes at most this."""

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections each port holds at once (``http.connections``, ``server.connections``; per process): four
times ``max_in_flight``'s default, so a real load (every call in flight on its own connection, and an SDK
pool's idle ones beside them) stays under it, and far under a pod's file descriptor limit (often 1,048,576,
at least 1,024 less the process's own)."""
MAX_CONNECTIONS_LIMIT = 100_000
"""The highest ``max_connections`` accepted: a guard against a typo's million."""
MAX_CONNECTION_WAIT_S = 86_400.0
"""The longest any connection limit may be (a day): the gRPC port's are milliseconds in a 32-bit int."""
DEFAULT_HTTP_HEAD_TIMEOUT_S = 30.0
"""A request head (at most 16 KiB, h11's cap) must arrive whole within this, from its first byte. An SDK
writes its head in one send: on the slowest link it arrives in one round trip, and TCP's retransmissions
of a lost segment (1, 2, 4, 8 s) still fit twice over."""
DEFAULT_HTTP_BODY_TIMEOUT_S = 300.0
"""A request body must arrive whole within this, from the end of its head: 20 MB at 67 KB/s (0.53 Mbit/s),
five times ``server.max_message_bytes``' default at 14 KB/s. Raise it with ``max_message_bytes`` for
larger bodies on slower links."""
DEFAULT_HTTP_IDLE_TIMEOUT_S = 120.0
"""A connection with no request under way (accepted, or its last answer sent) is closed after this. Above
every client pool's own idle expiry (httpx and the openai and anthropic SDKs 5 s, aiohttp 15 s, Node 4-5 s,
Go's net/http 90 s), so a client always drops an idle connection before the sidecar does, and never sends
a request on one the sidecar is closing (uvicorn's own default, 5 s, raced httpx's 5 s)."""
DEFAULT_GRPC_HANDSHAKE_TIMEOUT_S = 30.0
"""A gRPC connection must finish its handshake (TLS, and the HTTP/2 preface and settings) within this
(``grpc.server_handshake_timeout_ms``; gRPC's own default is 120 s): a real client does it in a few round
trips."""
DEFAULT_GRPC_IDLE_TIMEOUT_S = 300.0
"""A gRPC connection with no call for this long is sent GOAWAY and closed (``grpc.max_connection_idle_ms``).
A client's channel reconnects at its next call (one handshake); a call racing the GOAWAY is retried by
the client's gRPC library, never lost."""
DEFAULT_GRPC_MAX_AGE_S = 3600.0
"""A gRPC connection this old (gRPC adds ±10 % jitter) is sent GOAWAY: its calls in flight go on, new
ones go to a new connection (``grpc.max_connection_age_ms``); None: never."""
DEFAULT_GRPC_AGE_GRACE_S = 3600.0
"""After an aged connection's GOAWAY, its calls in flight have this long to end; a call still running then
is cut, UNAVAILABLE ``max connection age`` (``grpc.max_connection_age_grace_ms``). So a call is never cut
by age unless it runs longer than this: an hour-long StreamModel is served whole."""
DEFAULT_GRPC_KEEPALIVE_TIME_S = 60.0
"""The server pings a connection silent for this long (``grpc.keepalive_time_ms``; gRPC's own default is
2 h): a peer that vanished (its machine gone, a NAT that dropped the flow) is found and its connection
closed, calls and all. Every gRPC client answers pings by itself."""
DEFAULT_GRPC_KEEPALIVE_TIMEOUT_S = 20.0
"""A ping unanswered this long closes the connection (``grpc.keepalive_timeout_ms``, gRPC's default)."""
DEFAULT_GRPC_MIN_PING_INTERVAL_S = 10.0
"""A client may ping at most this often (``grpc.http2.min_ping_interval_without_data_ms``, with calls or
without): a third ping sooner (two strikes, gRPC's count) is answered GOAWAY ``too_many_pings``. Ten
seconds is the floor grpc-go and grpc-java clients hold their keepalive to; gRPC's own default (5 min)
refuses clients configured with the common 30 s or 60 s."""
