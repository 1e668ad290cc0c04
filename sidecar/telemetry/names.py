"""Every span, attribute and metric name the sidecar emits, in one place.

GenAI and HTTP names follow the OpenTelemetry semantic conventions; the sidecar's own live
under the ``sidecar.`` namespace.
"""

from __future__ import annotations

TRACER = "sidecar"

# span names
SPAN_CHAT = "chat {model}"
SPAN_EXECUTE_TOOL = "execute_tool {tool}"
SPAN_BACKOFF = "sidecar.backoff"
SPAN_THROTTLE_WAIT = "sidecar.throttle_wait"

# GenAI conventions
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
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# HTTP client conventions
HTTP_METHOD = "http.request.method"
HTTP_RESEND_COUNT = "http.request.resend_count"
HTTP_STATUS = "http.response.status_code"
URL_FULL = "url.full"

# the sidecar's own
ATTEMPT = "sidecar.attempt"
RETRY_SIGNAL = "sidecar.retry.signal"
RETRY_WAIT = "sidecar.retry.wait_s"
WAIT_SECONDS = "sidecar.wait_s"
WAIT_REASON = "sidecar.wait.reason"
CORRECTION_REASON = "sidecar.correction.reason"
CORRECTIONS = "sidecar.corrections"
OUTPUT_BUDGET = "sidecar.output_budget"
OUTPUT_BUDGET_RAISED = "sidecar.output_budget_raised"
FAILURE_KIND = "sidecar.failure.kind"
CORRECTABLE = "sidecar.failure.correctable"
SERVICE = "sidecar.service"
MODEL_ID = "sidecar.model"
JOB_ID = "sidecar.job.id"
WORKFLOW_ID = "sidecar.workflow.id"
ATTEMPTS = "sidecar.attempts"
THROTTLE = "sidecar.throttle"

# metrics
METRIC_DURATION = "gen_ai.client.operation.duration"
METRIC_TOKENS = "gen_ai.client.token.usage"
METRIC_RETRIES = "sidecar.retries"
METRIC_WAIT = "sidecar.wait.duration"
METRIC_MODEL_THROTTLE = "sidecar.model.throttle"
METRIC_SERVICE_THROTTLE = "sidecar.service.throttle"
METRIC_CIRCUIT_STATE = "sidecar.service.circuit.state"
METRIC_FAILURES = "sidecar.failures"

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
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
