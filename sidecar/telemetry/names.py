"""Every span, attribute, event and metric name the sidecar emits, in one place.

GenAI, HTTP and RPC names follow the OpenTelemetry semantic conventions; the sidecar's own live
under the ``sidecar.`` namespace. The tree one CallModel leaves in a trace::

    sidecar.v1.Sidecar/CallModel          SERVER    rpc.*; the caller's traceparent is its parent
    └── chat {model}                      CLIENT    gen_ai.*, error.type; events: throttle, correction
        ├── POST                          CLIENT    attempt 1: http.response.status_code, sidecar.retry.*
        ├── sidecar.backoff               INTERNAL  the wait after a retry signal
        ├── sidecar.throttle_wait         INTERNAL  the wait in the model's shared throttle
        └── POST                          CLIENT    attempt 2: http.request.resend_count = 1

and one ExecuteTool: ``execute_tool {tool}`` (INTERNAL) with one ``{METHOD}`` CLIENT span per
attempt, the same wait spans, and the service circuit's events. A CallModel to a route has one
``route.hop {deployment}`` span per deployment tried, the attempts of each under it::

    chat {route}                          CLIENT    sidecar.served_by, sidecar.hops
    ├── route.hop {deployment}            INTERNAL  sidecar.route, sidecar.hop, sidecar.hop.role, error.type
    │   ├── POST                          CLIENT    that deployment's attempts, waits and circuit events
    │   └── sidecar.backoff
    └── route.hop {fallback}              INTERNAL  (sidecar.hop.skipped when its circuit was open;
        └── POST                                     sidecar.hop.hedge: sent as a hedge, beside the hop
                                                     before it; sidecar.hop.cancelled: lost the race)

A StreamModel leaves the CallModel tree with ``sidecar.streamed`` on the chat span,
``sidecar.stream.restart`` events on it, and a ``sidecar.first_token`` event on each attempt that
sent a delta.
"""

from __future__ import annotations

TRACER = "sidecar"
"""The instrumentation scope of every span and metric."""

# ---------------------------------------------------------------- span names
SPAN_CHAT = "chat {model}"
SPAN_EXECUTE_TOOL = "execute_tool {tool}"
SPAN_BACKOFF = "sidecar.backoff"
SPAN_THROTTLE_WAIT = "sidecar.throttle_wait"
SPAN_ROUTE_HOP = "route.hop {deployment}"
SPAN_COMPACTION = "compaction"
"""A conversation compacted to fit (INTERNAL), a child of its call's span; the summarizer's call inside it."""
# an upstream attempt is named for its HTTP method ("POST", "GET"), as the HTTP conventions say
# (an MCP server's for its MCP method and tool, "tools/call search"); a server span for its full method
# ("sidecar.v1.Sidecar/CallModel"), as the RPC conventions say.
SPAN_MCP_SERVER = "tools/call {tool}"
"""The MCP front's SERVER span of one tools/call (the MCP conventions: ``{mcp.method.name} {target}``)."""
SPAN_MCP_CLIENT = "{method} {tool}"
"""One attempt to an MCP tool backend (CLIENT): ``tools/call search``, by the same conventions."""
SPAN_HTTP_SERVER = "{method} {route}"
"""An HTTP front's SERVER span (the HTTP conventions: ``{http.request.method} {http.route}``)."""

# ---------------------------------------------------------------- GenAI conventions
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
PROVIDER_OPTIONS = "sidecar.request.provider_options"
"""With ``record_content``: the request's provider_options_json, masked like any content."""
GEN_AI_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_RESULT = "gen_ai.tool.call.result"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"

# ---------------------------------------------------------------- HTTP client conventions
HTTP_METHOD = "http.request.method"
HTTP_RESEND_COUNT = "http.request.resend_count"
HTTP_STATUS = "http.response.status_code"
URL_FULL = "url.full"

# ---------------------------------------------------------------- HTTP server conventions (the HTTP fronts)
HTTP_ROUTE = "http.route"

# ---------------------------------------------------------------- RPC server conventions
RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
RPC_GRPC_STATUS = "rpc.grpc.status_code"
NETWORK_PEER_ADDRESS = "network.peer.address"
NETWORK_PEER_PORT = "network.peer.port"

# ---------------------------------------------------------------- MCP server conventions
MCP_METHOD_NAME = "mcp.method.name"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
ERROR_TOOL = "tool_error"
"""error.type of a tools/call answered with isError, as the MCP conventions say."""

# ---------------------------------------------------------------- the sidecar's own attributes
ATTEMPT = "sidecar.attempt"
"""On an attempt span: its number within the call, 1-based."""
ATTEMPTS = "sidecar.attempts"
"""On a chat / execute_tool span: the upstream attempts the call made."""
RETRY_SIGNAL = "sidecar.retry.signal"
"""rate_limit | overload | transient: the signal an attempt received (also on its backoff span)."""
RETRY_WAIT = "sidecar.retry.wait_s"
"""On an attempt span: the wait that followed it before the next attempt."""
RETRY_AFTER = "sidecar.retry.retry_after_s"
"""On an attempt span: the wait the upstream asked for (Retry-After), when it asked."""
WAIT_SECONDS = "sidecar.wait_s"
"""On a wait span: the wait it was planned to last (its duration is what it really lasted)."""
WAIT_REASON = "sidecar.wait.reason"
CORRECTION_REASON = "sidecar.correction.reason"
"""On an attempt span whose reply was sent back to the model: the failure kind (JSON_PARSE ...)."""
CORRECTIONS = "sidecar.corrections"
OUTPUT_BUDGET = "sidecar.output_budget"
"""On an attempt span: the output tokens it asked for (max_tokens)."""
OUTPUT_BUDGET_RAISED = "sidecar.output_budget_raised"
FAILURE_KIND = "sidecar.failure.kind"
CORRECTABLE = "sidecar.failure.correctable"
SERVICE = "sidecar.service"
MODEL_ID = "sidecar.model"
JOB_ID = "sidecar.job.id"
WORKFLOW_ID = "sidecar.workflow.id"
THROTTLE = "sidecar.throttle"
CIRCUIT_STATE = "sidecar.circuit.state"
CIRCUIT_PROBE = "sidecar.circuit.probe"
"""On an attempt span: the one attempt that probes a route deployment's half-open circuit (true)."""
STREAMED = "sidecar.streamed"
"""On a chat span: the reply was streamed (StreamModel)."""
RESTART_REASON = "sidecar.restart.reason"
"""On a stream restart event: why the deltas start again."""
RESTART_CAUSE = "sidecar.restart.cause"
"""On a stream restart event: upstream_fault | truncated | correction."""
REPORT_ACCEPTED = "sidecar.report.accepted"
"""On a ClassifyFailure server span naming a service: whether the report may feed its circuit."""
ROUTE = "sidecar.route"
"""On a route.hop span: the route (the model id the caller named)."""
HOP = "sidecar.hop"
"""On a route.hop span: its number within the call's chain, 1-based."""
HOP_ROLE = "sidecar.hop.role"
"""balance | fallback | context: why the deployment is in the chain."""
HOP_SKIPPED = "sidecar.hop.skipped"
COMPACTION_TRIGGER = "sidecar.compaction.trigger"
COMPACTION_TOKENS_BEFORE = "sidecar.compaction.tokens_before"
COMPACTION_TOKENS_AFTER = "sidecar.compaction.tokens_after"
COMPACTION_WINDOW = "sidecar.compaction.window"
COMPACTION_STRATEGIES = "sidecar.compaction.strategies"
"""The strategies that changed something, in order (a string array)."""
COMPACTION_SUMMARIZER_CALLS = "sidecar.compaction.summarizer_calls"
"""On a route.hop span: the deployment's circuit was open, no attempt was made."""
HOP_HEDGE = "sidecar.hop.hedge"
"""On a route.hop span: sent as a hedge (the hop before it had no first token within hedge_after)."""
HOP_CANCELLED = "sidecar.hop.cancelled"
"""On a route.hop span: it lost a hedged race and was cancelled, its upstream response closed."""
HOP_REASON = "sidecar.hop.reason"
"""On a failed route.hop span: why it ended (its failure's message, capped)."""
SERVED_BY = "sidecar.served_by"
"""On a chat span of a route: the deployment that served the call."""
HOPS = "sidecar.hops"
"""On a chat span of a route: the deployments tried (skipped ones included)."""

# ---------------------------------------------------------------- span events
EVENT_CORRECTION = "sidecar.correction"
EVENT_OUTPUT_BUDGET_RAISED = "sidecar.output_budget_raised"
EVENT_CIRCUIT_OPENED = "sidecar.circuit.opened"
EVENT_CIRCUIT_REOPENED = "sidecar.circuit.reopened"
EVENT_CIRCUIT_HALF_OPEN = "sidecar.circuit.half_open"
EVENT_CIRCUIT_CLOSED = "sidecar.circuit.closed"
EVENT_CIRCUIT_PROBE_LOST = "sidecar.circuit.probe_lost"
EVENT_CIRCUIT_REFUSED = "sidecar.circuit.refused"
EVENT_SERVICE_THROTTLE = "sidecar.service.throttle_changed"
EVENT_MODEL_THROTTLE = "sidecar.model.throttle_changed"
EVENT_MODEL_PAUSED = "sidecar.model.paused"
EVENT_FIRST_TOKEN = "sidecar.first_token"
"""On a streamed attempt's span: its first delta arrived and went to the caller."""
EVENT_STREAM_RESTART = "sidecar.stream.restart"
"""On a streamed chat span: the caller was told to drop what it holds (reason, cause, the attempt that follows)."""
EVENT_STREAM_CONTINUED = "sidecar.stream.continued"
"""On a streamed chat span: the stream broke after text and went on from it (reason, cause, the attempt
that follows, the characters the caller held)."""
EVENT_STREAM_EVENT_SKIPPED = "sidecar.stream.event_skipped"
"""On a streamed attempt's span: an event that could not be read was skipped (the detail)."""
CONTINUED_CHARS = "sidecar.continued.chars"
"""On a stream continued event: the characters of text the caller held (the prefill)."""
EVENT_STATE_UNAVAILABLE = "sidecar.state.unavailable"
"""The shared state backend cannot be reached: decisions are local until it is back."""
EVENT_STATE_AVAILABLE = "sidecar.state.available"
EVENT_REPLAYED = "sidecar.replayed"
"""On an HTTP front's SERVER span: a client re-sent a failure inside its window and got the same answer at once,
with no call (``server/http/resends.py``): the failure's kind, the attempts its first answer made, the window left."""
REPLAYED_ATTEMPTS = "sidecar.replayed.attempts"
REPLAYED_WINDOW_LEFT = "sidecar.replayed.window_left_s"
SPAN_ADMIN = "admin {action}"
"""An operator action (close-circuit | lift-pause | reset-spend): one INTERNAL span, with EVENT_ADMIN_ACTION."""
EVENT_ADMIN_ACTION = "sidecar.admin.action"
"""On an admin span: the action, its target, who (the admin token's name, never the token), the outcome."""
ADMIN_ACTION = "sidecar.admin.action"
ADMIN_TARGET = "sidecar.admin.target"
ADMIN_WHO = "sidecar.admin.who"
ADMIN_OUTCOME = "sidecar.admin.outcome"
"""changed | unchanged | not_found (and ``sidecar.admin.was_usd`` on a reset-spend)."""
ADMIN_WAS_USD = "sidecar.admin.was_usd"
STATE_BACKEND = "sidecar.state.backend"

# ---------------------------------------------------------------- metrics
METRIC_DURATION = "gen_ai.client.operation.duration"
METRIC_TOKENS = "gen_ai.client.token.usage"
METRIC_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
"""StreamModel only: from an attempt's request to its first delta (GenAI client conventions)."""
METRIC_TIME_PER_OUTPUT_CHUNK = "gen_ai.client.operation.time_per_output_chunk"
"""StreamModel only: from one delta to the next, for every delta after an attempt's first."""
METRIC_RETRIES = "sidecar.retries"
METRIC_ATTEMPTS = "sidecar.attempts"
"""Upstream attempts by outcome (ok | failed | transport_fault), retry signal (or none), kind (model |
service) and the model or service: every attempt, the first included (a counter; the span attribute
ATTEMPTS is a call's count)."""
ATTEMPT_OUTCOME = "sidecar.attempt.outcome"
ATTEMPT_KIND = "sidecar.attempt.kind"
METRIC_WAIT = "sidecar.wait.duration"
METRIC_MODEL_THROTTLE = "sidecar.model.throttle"
METRIC_SERVICE_THROTTLE = "sidecar.service.throttle"
METRIC_CIRCUIT_STATE = "sidecar.service.circuit.state"
METRIC_FAILURES = "sidecar.failures"
METRIC_STATE_AVAILABLE = "sidecar.state.available"
METRIC_TOKENS_TOTAL = "sidecar.tokens"
"""Tokens spent, by sidecar.token.type: input | output | cache_read | cache_write | reasoning."""
TOKEN_TYPE = "sidecar.token.type"
METRIC_SPEND = "sidecar.spend"
METRIC_IN_FLIGHT = "sidecar.in_flight"
METRIC_SHED = "sidecar.admission.rejected"
METRIC_OVERHEAD = "sidecar.overhead.duration"
METRIC_CONNECTIONS_CLOSED = "sidecar.http.connections.closed"
"""HTTP connections the port's limits closed, by ``reason`` (CLOSE_REASON): head_timeout, body_timeout,
idle_timeout, evicted, refused (``server/http/connections.py``)."""
CLOSE_REASON = "reason"
METRIC_RELOADS = "sidecar.config.reloads"
"""Config reloads tried, by ``outcome`` (RELOAD_OUTCOME): applied or refused."""
RELOAD_OUTCOME = "outcome"
METRIC_REPLAYED = "sidecar.http.replayed"
"""Re-sent failures an HTTP model front answered again with no call, by ``http.route`` and ``sidecar.failure.kind``
(``server/http/resends.py``)."""
METRIC_CALLER_CALLS = "sidecar.caller.calls"
METRIC_CALLER_TOKENS = "sidecar.caller.tokens"
CALLER = "sidecar.caller"
"""A caller's name (``server.auth.tokens[].name``, else ``tokens[i]``): a label and a SERVER span's attribute."""
CALLER_OUTCOME = "sidecar.caller.outcome"
CALLER_LIMIT = "sidecar.caller.limit"
"""The time the sidecar itself added to a call: upstream time and deliberate waits left out (``core.overhead``)."""
DOOR = "sidecar.door"
"""grpc | http | internal: the door a call came in by."""
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
"""sidecar.overhead.duration's boundaries (seconds): the sidecar's own work is sub-millisecond to milliseconds."""

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
"""gen_ai.client.operation.duration's boundaries, as the GenAI conventions advise (seconds); the two
streaming histograms (time_to_first_chunk, time_per_output_chunk) are advised the same ones."""
TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
"""gen_ai.client.token.usage's boundaries, as the GenAI conventions advise (tokens)."""
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
"""sidecar.wait.duration's boundaries: pacing waits are milliseconds, backoffs up to the 300 s cap."""
