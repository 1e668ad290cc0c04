"""The Amazon Bedrock Converse wire as the fake provider speaks it (the format: ``formats.bedrock_converse``).

Its routes are ``/model/{modelId}/converse`` and ``/model/{modelId}/converse-stream`` (``routed``:
the model and the streaming are the URL's). A stream is ``application/vnd.amazon.eventstream``: each
event one binary frame the fake encodes itself (``frame``: the prelude of total and headers
length with its CRC32, the headers as string values, the JSON payload, the message's CRC32), the
way botocore's ``EventStreamBuffer`` reads them (``tests/formats/test_bedrock_sdk.py`` proves it reads every
one). The events, each in its part::

    open   messageStart {"role": "assistant"}
    delta  contentBlockDelta {"delta": {"text"} | {"toolUse": {"input"}} | {"reasoningContent": ...}}
    body   contentBlockStart (a tool call's id and name), contentBlockStop
    close  messageStop {"stopReason"}, metadata {"usage", "metrics"}

An error after the stream began is an exception frame (``:message-type`` exception, its
``:exception-type`` the error's type in lowerCamelCase, payload ``{"message"}``); a step's
``extra_error_fields: {"__type": "ThrottlingException"}`` names another type than the preset's.

The presets, as Bedrock answers (status, ``x-amzn-ErrorType``, ``{"message"}``)::

    rate_limit           429 ThrottlingException
    insufficient_quota   400 ServiceQuotaExceededException
    payment_required       (the same)
    overloaded           503 ServiceUnavailableException
    server_error         500 InternalServerException
    context_too_long     400 ValidationException "Input is too long for requested model."
    invalid_key          403 UnrecognizedClientException "The security token included in the request is invalid."
    model_not_found      404 ResourceNotFoundException
    account_blocked      403 AccessDeniedException "You don't have access to the model with the specified
                         model ID." (a model not enabled for the account)
    model_unavailable    400 ValidationException "Invocation of model ID ... with on-demand throughput isn't
                         supported. Retry your request with the ID or ARN of an inference profile ..."
    content_policy       200 with stopReason guardrail_intervened (the guardrail's blocked message)
    content_filter       200 with stopReason content_filtered

A bare status answers the type Bedrock answers it with (408: ModelTimeoutException, 424:
ModelErrorException ...). What it checks, as the service does::

    Authorization        ``Bearer <key>`` (a Bedrock API key), or a SigV4 signature: the shape
                         ``AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/bedrock/aws4_request,
                         SignedHeaders=..., Signature=<64 hex>``, its date x-amz-date's, host and
                         x-amz-date signed; signed with ``FAKE_ACCESS_KEY``, the signature itself is
                         recomputed with ``FAKE_SECRET_KEY`` (botocore's signer) and must match.
                         Otherwise 403: MissingAuthenticationTokenException, IncompleteSignatureException,
                         InvalidSignatureException
    reasoningContent     every reasoningText signature sent back verifies (an HMAC under the fake's own key)
    thinking on          an assistant turn that calls tools begins with its reasoning, as Anthropic's
                         models on Bedrock want

With thinking on (additionalModelRequestFields.thinking) the reply begins with a reasoningContent
block: its text, signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

from sidecar.core.conversation import ReasoningPart
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import ReasoningDelta
from sidecar.fakes._brain import Reply, tokens_for
from sidecar.fakes._conversation import Conversation, Hints, conversation_of
from sidecar.fakes._http import Request
from sidecar.fakes._sse import Part, Plan, SseEvent, split_text
from sidecar.fakes._wire import ErrorSpec, Exchange, Wire
from sidecar.providers.formats.bedrock_converse import FORMAT
from sidecar.providers.formats.bedrock_converse.vocab import is_exception
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import EVENT_STREAM, Sse

__all__ = ["BEDROCK", "FAKE_ACCESS_KEY", "FAKE_SECRET_KEY", "frame", "sign"]

FAKE_ACCESS_KEY = "AKIAFAKESIDECAR00001"
FAKE_SECRET_KEY = "fake/secret/key/of/the/sidecar/fake/provider00"
"""A credential pair whose signatures the fake verifies in full (any other key id: the shape only)."""
_KEY = b"sidecar-fake-bedrock-reasoning-key"
_BLOCK = "BLOCK"
"""The type of a preset that answers 200 with a blocked reply (``error_body`` makes it a reply, not an error)."""
GUARDRAIL_TEXT = "Sorry, the model cannot answer this question."
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[a-z0-9-]+)"
    r"/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=(?P<signature>[0-9a-f]{64})$"
)


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, their CRC32), headers (each a name
    length, the name, type 7 string, a value length, the value), the payload, the message's CRC32."""
    head = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        head += struct.pack(">B", len(raw_name)) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + head + payload
    return message + struct.pack(">I", binascii.crc32(message))


def sign(seed: str) -> str:
    """A reasoning signature the fake can verify: a nonce and its MAC, base64."""
    nonce = hashlib.sha256(seed.encode()).digest()[:12]
    return base64.b64encode(nonce + hmac.new(_KEY, nonce, hashlib.sha256).digest()).decode("ascii")


def _verifies(signature: str) -> bool:
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) > 12 and hmac.compare_digest(raw[12:], hmac.new(_KEY, raw[:12], hashlib.sha256).digest())


@dataclass
class _Asked(Conversation):
    thinking: bool = False


def _denied(error_type: str, message: str) -> ErrorSpec:
    return ErrorSpec(403, error_type, message)


def _bad(message: str) -> ErrorSpec:
    return ErrorSpec(400, "ValidationException", message)


def _signature_of(request: Request, signed: list[str], date: str, region: str) -> str:
    """The SigV4 signature of ``request`` as received, by botocore's signer under the fake's secret (botocore is
    loaded by the first signed request, so that the embedded default, which serves this wire, starts without it)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    host = request.headers.get("host", "")
    url = f"http://{host}{request.target}"
    headers = {name: request.headers.get(name, "") for name in signed}
    aws = AWSRequest(method=request.method, url=url, data=request.body, headers=headers)
    aws.context["timestamp"] = date
    signer = SigV4Auth(Credentials(FAKE_ACCESS_KEY, FAKE_SECRET_KEY), "bedrock", region)
    canonical = signer.canonical_request(aws)
    return signer.signature(signer.string_to_sign(aws, canonical), aws)


def _thinking(body: dict[str, Any]) -> bool:
    extra = body.get("additionalModelRequestFields")
    return isinstance(extra, dict) and isinstance(extra.get("thinking"), dict)


class _Bedrock(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "bedrock_fake"
    call_prefix = "tooluse_fake"
    stream_content_type = EVENT_STREAM

    def routed(self, path: str, body: Any) -> dict[str, Any] | None:
        """The body with the URL's model (``modelId``, and ``model`` for the fake's scripts) and streaming."""
        found = FORMAT.front.routed(path, body if isinstance(body, dict) else {})
        return None if found is None else {**found, "model": found["modelId"]}

    def unauthorized(self, request: Request) -> ErrorSpec | None:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            return None if auth[len("Bearer ") :].strip() else _denied("UnrecognizedClientException", "Empty key.")
        if not auth:
            return _denied("MissingAuthenticationTokenException", "Missing Authentication Token")
        found = _AUTH.match(auth)
        date = request.headers.get("x-amz-date", "")
        if found is None:
            return _denied("IncompleteSignatureException", f"Authorization header requires a SigV4 shape: {auth[:40]}")
        signed = found["signed"].split(";")
        if found["service"] != "bedrock" or found["date"] != date[:8] or not {"host", "x-amz-date"} <= set(signed):
            message = "Credential should be scoped to a valid region and service bedrock, dated as x-amz-date."
            return _denied("InvalidSignatureException", message)
        if found["key"] == FAKE_ACCESS_KEY and not hmac.compare_digest(
            found["signature"], _signature_of(request, signed, date, found["region"])
        ):
            message = (
                "The request signature we calculated does not match the signature you provided. Check your AWS "
                "Secret Access Key and signing method. Consult the service documentation for details."
            )
            return _denied("InvalidSignatureException", message)
        return None

    def refuse(self, body: dict[str, Any]) -> ErrorSpec | None:
        thinking = _thinking(body)
        messages = body.get("messages")
        for i, m in enumerate(messages if isinstance(messages, list) else []):
            content = m.get("content") if isinstance(m, dict) else None
            if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(content, list):
                continue
            blocks = [b for b in content if isinstance(b, dict)]
            for j, b in enumerate(blocks):
                text = b.get("reasoningContent", {}).get("reasoningText") if isinstance(b.get("reasoningContent"),
                                                                                        dict) else None  # fmt: skip
                if isinstance(text, dict) and not _verifies(str(text.get("signature") or "")):
                    return _bad(f"The model returned the following errors: messages.{i}.content.{j}: Invalid "
                                "`signature` in `thinking` block")  # fmt: skip
            if thinking and any("toolUse" in b for b in blocks) and (not blocks or "reasoningContent" not in blocks[0]):
                return _bad(
                    f"The model returned the following errors: messages.{i}.content.0.type: Expected `thinking` or "
                    "`redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message "
                    "must start with a thinking block."
                )
        return None

    def parse(self, body: dict[str, Any]) -> Conversation:
        hints, rest = self.hints(body)
        conv = conversation_of(self.front.parse(rest), hints, body.get("toolConfig"))
        fields = {name: getattr(conv, name) for name in Conversation.__dataclass_fields__}
        return _Asked(**fields, thinking=_thinking(body))

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        config = body.get("toolConfig")
        choice = config.get("toolChoice") if isinstance(config, dict) else None
        tool = choice.get("tool") if isinstance(choice, dict) else None
        forced = tool.get("name") if isinstance(tool, dict) and isinstance(tool.get("name"), str) else None
        return Hints(forced_tool=forced), {k: v for k, v in body.items() if k != "model"}

    def chat_reply(self, reply: Reply, ex: Exchange, input_tokens: int, output_tokens: int) -> ChatReply:
        out = super().chat_reply(reply, ex, input_tokens, output_tokens)
        if reply.finish == "refusal":
            out.raw_finish = "guardrail_intervened"
        asked = ex.conversation
        if isinstance(asked, _Asked) and asked.thinking and out.refusal is None:
            plan = f"I will call {', '.join(c.name for c in out.tool_calls)}." if out.tool_calls else "I can answer."
            text = f"The user asks: {asked.last_user_text[:120]!r}. {plan}"
            thinking = tokens_for(len(text))
            out.reasoning = [ReasoningPart(text, sign(f"{ex.n}:{text}"))]
            out.output_tokens, out.reasoning_tokens = out.output_tokens + thinking, out.reasoning_tokens + thinking
        return out

    def error_body(self, spec: ErrorSpec, ex: Exchange, *, in_stream: bool = False) -> dict[str, Any]:
        if spec.type != _BLOCK:
            body = self.front.error_body(spec.message, spec.type)
            if in_stream:  # the exception frame's type (``BedrockWriter.error`` takes it out of the payload)
                body["__type"] = spec.type
            body.update(spec.extra)
            return body
        prompt = tokens_for(ex.conversation.input_chars)
        text = GUARDRAIL_TEXT if spec.message == "guardrail_intervened" else ""
        reply = ChatReply(text, raw_finish=spec.message, refusal=text or None, input_tokens=prompt,
                          output_tokens=tokens_for(len(text)))  # fmt: skip
        reply.finish = FinishReason.CONTENT_FILTER
        return self.front.render(reply, self.head(ex, 0))

    def error_headers(self, spec: ErrorSpec) -> dict[str, str]:
        if spec.type == _BLOCK or spec.status < 400:
            return {}
        return {"x-amzn-errortype": f"{spec.type}:http://internal.amazon.com/coral/com.amazon.bedrock/"}

    def blocked_stream(self, body: dict[str, Any], ex: Exchange) -> list[SseEvent]:
        """A blocked reply (``content_policy``, ``content_filter``) streamed: its events, not one error."""
        content = body["output"]["message"]["content"]
        raw: list[Sse] = [("messageStart", {"role": "assistant"})]
        text = content[0].get("text", "") if content else ""
        if text:
            raw += [("contentBlockDelta", {"delta": {"text": text}, "contentBlockIndex": 0}),
                    ("contentBlockStop", {"contentBlockIndex": 0})]  # fmt: skip
        raw += [("messageStop", {"stopReason": body["stopReason"]}),
                ("metadata", {"usage": body["usage"], "metrics": body["metrics"]})]  # fmt: skip
        return self.tagged(raw)

    def encode(self, event: SseEvent) -> bytes:
        """An event as its event-stream frame (an exception's: of message type exception)."""
        name = event.event or ""
        payload = event.data.encode()
        if is_exception(name):
            headers = {":exception-type": name, ":content-type": "application/json", ":message-type": "exception"}
        else:
            headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
        return frame(headers, payload)

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        final = self.chat_reply(plan.reply, ex, plan.input_tokens, plan.output_tokens)
        writer = self.front.writer(self.head(ex, created))
        raw: list[Sse] = writer.start(plan.input_tokens)
        for i, r in enumerate(final.reasoning):
            for words in split_text(r.text):
                raw += writer.delta(ReasoningDelta(i, text=words))
            if r.signature:
                raw += writer.delta(ReasoningDelta(i, signature=r.signature))
        raw += self.piece_events(writer, plan, ex)
        raw += writer.final(final)
        return self.tagged(raw)

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        if name == "messageStart":
            return "open"
        if name in ("messageStop", "metadata"):
            return "close"
        return "delta" if name == "contentBlockDelta" else "body"

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        model = ex.model or "unknown"
        quota = ErrorSpec(400, "ServiceQuotaExceededException", "You have exceeded the quota of tokens per day for "
                          "this model in this account. Request a quota increase.")  # fmt: skip
        specs = {
            "rate_limit": ErrorSpec(429, "ThrottlingException", "Too many requests, please wait before trying again."),
            "insufficient_quota": quota,
            "payment_required": quota,
            "overloaded": ErrorSpec(503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
            "server_error": ErrorSpec(500, "InternalServerException", "The system encountered an unexpected error "
                                      "during processing. Try your request again."),
            "context_too_long": ErrorSpec(400, "ValidationException", "Input is too long for requested model."),
            "invalid_key": ErrorSpec(403, "UnrecognizedClientException", "The security token included in the "
                                     "request is invalid."),
            "model_not_found": ErrorSpec(404, "ResourceNotFoundException", "Could not resolve the foundation model "
                                         f"from model identifier: {model}. Please verify that the requested model "
                                         "exists and is accessible within the specified region."),
            "account_blocked": ErrorSpec(403, "AccessDeniedException", "You don't have access to the model with "
                                         "the specified model ID."),
            "model_unavailable": ErrorSpec(400, "ValidationException", f"Invocation of model ID {model} with "
                                           "on-demand throughput isn\u2019t supported. Retry your request with the "
                                           "ID or ARN of an inference profile that contains this model."),
            "content_policy": ErrorSpec(200, _BLOCK, "guardrail_intervened"),
            "content_filter": ErrorSpec(200, _BLOCK, "content_filtered"),
        }  # fmt: skip
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        return {"x-amzn-requestid": f"00000000-0000-4000-8000-{ex.n:012d}"}

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        return [SseEvent(json.dumps({"note": "an event this client does not know yet"}), "fakeFutureEvent", "body")]


BEDROCK = _Bedrock()
