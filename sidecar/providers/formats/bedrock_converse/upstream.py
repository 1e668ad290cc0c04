"""The Amazon Bedrock Converse upstream (``converse``, ``converse-stream``), whole and streamed.

``POST {base}/model/{modelId}/converse`` (streamed: ``/converse-stream``, answered as
``application/vnd.amazon.eventstream`` frames; a reply and a stream are read by ``reply.py``).
``BedrockUpstream.body`` renders a ChatRequest (``front.py`` reads one back: its inverse)::

    core (ChatRequest)                          Converse body (its keys: ``shapes.ConverseRequest``)
    system, response schema, system_cache       system: the prompt, the schema appended (``chat.with_schema``),
                                                then a cachePoint
    Message(USER, text | parts)                 a user message: its blocks (``vocab``'s table)
    Message(ASSISTANT, reasoning, text | parts, an assistant message: its reasoning first (byte-identical),
            tool_calls)                         its text or parts, its tool calls (toolUse)
    Message(TOOL, tool_results)                 a user message of toolResult blocks
    consecutive messages of one role            merged into one (Converse wants the roles to alternate)
    tools (tools.cache), tool_choice            toolConfig: a toolSpec each (a cachePoint after one);
                                                toolChoice auto, any (required) or a named tool
    max_tokens, temperature, top_p, stop        inferenceConfig
    reasoning.budget_tokens                     additionalModelRequestFields.thinking (Anthropic's models on
                                                Bedrock)
    provider_options_json {"bedrock_converse":  that object's keys merged into the body (guardrailConfig ...);
      {...}}                                    its additionalModelRequestFields merged into the sidecar's

Not carried, so refused by name before sending (``carried.refuse_uncarried``): a document by URL,
top_k, seed, presence_penalty, frequency_penalty (model-specific: give them in
additionalModelRequestFields), end_user, parallel_tool_calls and strict function calling (tools.strict)
(no field). ``check`` then refuses, naming the field: tool_choice none (Converse has none: send no
tools), a reasoning effort (thinking is a budget), an image by a URL that is not s3:// (Converse takes
the bytes or an S3 location), an image type Converse has no format for, an image's detail "low", a
document title Converse refuses as a name, an assistant message's image or document, provider options
that set a key the sidecar sets.

Requests are signed per request (``sign``): with a Bedrock API key (the provider's ``api_key``, else
``AWS_BEARER_TOKEN_BEDROCK``) it is ``Authorization: Bearer`` (``headers``) and ``sign`` adds nothing;
without one, SigV4 by botocore's signer (``SigV4Auth``, service ``bedrock``), the credentials from the
variables of ``config.AWS_ENVIRONMENT`` (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, a session token;
read by botocore's ``EnvProvider``, each value masked), the region the provider's ``region``, else the base
URL's, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``. Signed: host, content-type, x-amz-date (and the session token).
No credentials at all is UNAUTHORIZED before anything is sent (``check``).

Error answers (``classify``), by the type ``x-amzn-ErrorType`` names (in a stream: the exception's)::

    ThrottlingException                         signal RATE_LIMIT
    ServiceUnavailableException,                signal OVERLOAD
      ModelNotReadyException
    ModelTimeoutException, InternalServerException,
      ModelStreamErrorException, ModelErrorException  signal TRANSIENT
    ValidationException "input is too long ..." CONTEXT_OVERFLOW
    what only an operator can fix               MODEL_NOT_FOUND, UNAUTHORIZED (``providers.errors.
      (ValidationException, AccessDeniedException)  OPERATOR_FIXES``: an inference profile, a region
                                                  without the model, a model not enabled)
    ValidationException otherwise               INVALID_INPUT (the provider's words as the rule)
    AccessDeniedException, a signature's or a   UNAUTHORIZED
      key's (UnrecognizedClientException,
      InvalidSignatureException ...)
    ResourceNotFoundException                   MODEL_NOT_FOUND (at the provider)
    ServiceQuotaExceededException               QUOTA_EXHAUSTED
    anything else                               ``providers.errors.classify_response``
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sidecar.config import ProviderConfig
from sidecar.core.backoff import parse_retry_after
from sidecar.core.conversation import (
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    TextPart,
    ToolCallResult,
)
from sidecar.core.details import ProviderDetail
from sidecar.core.json_depth import loads
from sidecar.core.kinds import RetrySignal, Role
from sidecar.core.rate_budget import Budget
from sidecar.core.redact import redact_body
from sidecar.core.retry import Retry
from sidecar.core.taxonomy import (
    ContextOverflow,
    InvalidInput,
    ModelNotFound,
    QuotaExhausted,
    SidecarFailure,
    Unauthorized,
)
from sidecar.core.text import cap
from sidecar.providers.errors import Target, classify_response, for_operator
from sidecar.providers.formats.bedrock_converse.reply import BedrockStream, parse_reply
from sidecar.providers.formats.bedrock_converse.vocab import (
    BEARER_ENV,
    ENV_CREDENTIALS,
    ERROR_HEADER,
    ERROR_STATUS,
    FORMAT_NAME,
    IMAGE_FORMATS,
    PDF,
    SERVICE,
    SIDECAR_KEYS,
    cache_point,
    content_block,
    reasoning_blocks,
    tool_use_blocks,
    url_format,
)
from sidecar.providers.formats.carried import CONTROLS, plain, refuse_uncarried
from sidecar.providers.formats.chat import EMPTY_PARAMETERS, ChatReply, ChatRequest, with_schema
from sidecar.providers.formats.fields import text_or_empty
from sidecar.providers.formats.inline import read_data_url
from sidecar.providers.formats.options import FIELD, merge_options, options_for
from sidecar.providers.formats.protocol import EVENT_STREAM

if TYPE_CHECKING:
    from botocore.credentials import Credentials

__all__ = [
    "BedrockUpstream",
    "converse_path",
    "error_type_of",
    "provider_options",
    "render_messages",
]

MODEL_PATH = "/model/"
PATH_SAFE = "!$&'()*+,;=:@"
"""Characters of a model id left as they are in its path segment (RFC 3986 pchar): the path is signed as it
is sent, and an HTTP client normalizes these back from percent-escapes anyway."""
_UNCARRIED = frozenset({"top_k", "seed", "presence_penalty", "frequency_penalty", "end_user", "parallel_tool_calls"})
_CHOICES = {"auto": "auto", "required": "any"}
_CONTEXT = re.compile(
    r"input is too long|too long for (the )?requested model|prompt is too long|context (window|length)|"
    r"too many (input )?tokens|maximum (input )?(context|token)",
    re.I,
)
_NAME = re.compile(r"^[A-Za-z0-9\-()\[\]]+( [A-Za-z0-9\-()\[\]]+)*$")
"""A document's name as Converse takes it: letters, digits, hyphens, parentheses, brackets, single spaces."""
_HOST_REGION = re.compile(r"bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com", re.I)
_SIGNED = ("host", "content-type")
"""The request's headers SigV4 signs (with x-amz-date and the session token it adds)."""
UNAUTHORIZED = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "IncompleteSignatureException",
        "MissingAuthenticationTokenException",
        "ExpiredTokenException",
    }
)
"""The error types that say the sidecar's own credentials (a signature, a key, a role's access) do not hold."""
_RETRIED: Mapping[str, RetrySignal] = {
    "ThrottlingException": RetrySignal.RATE_LIMIT,
    "ServiceUnavailableException": RetrySignal.OVERLOAD,
    "ModelNotReadyException": RetrySignal.OVERLOAD,
    "ModelTimeoutException": RetrySignal.TRANSIENT,
    "InternalServerException": RetrySignal.TRANSIENT,
    "ModelStreamErrorException": RetrySignal.TRANSIENT,
    "ModelErrorException": RetrySignal.TRANSIENT,
}


def converse_path(model: str, *, stream: bool) -> str:
    """Where a request for ``model`` goes, below the base URL (``https://bedrock-runtime.<region>.amazonaws.com``)."""
    return f"{MODEL_PATH}{quote(model, safe=PATH_SAFE)}/{'converse-stream' if stream else 'converse'}"


def _env_credentials() -> Credentials | None:
    """SigV4 credentials from the environment; botocore (18 MB, with urllib3 and dateutil) is loaded here, by a
    Bedrock provider with no API key, and by its first signed request, never by a sidecar with no Bedrock."""
    from botocore.credentials import EnvProvider

    return EnvProvider(mapping=ENV_CREDENTIALS).load()


def _region(provider: ProviderConfig) -> str:
    if provider.region:
        return provider.region
    found = _HOST_REGION.search(provider.base_url)
    if found:
        return found.group(1).lower()
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""


class BedrockUpstream:
    """The sidecar as a Converse client (the module's tables), for one configured provider."""

    carries: frozenset[str] = frozenset(
        {
            "parts.text",
            "parts.image",
            "parts.document",
            "parts.text_document",
            "parts.cache",
            "tool_results.parts",
            "tool_results.image",
            "reasoning.history",
            "tools.cache",
            *(c for c in CONTROLS if c not in _UNCARRIED),
        }
    )
    stream_type = EVENT_STREAM

    def __init__(self, provider: ProviderConfig) -> None:
        key = provider.api_key.get_secret_value() if provider.api_key else ""
        self._bearer = key or os.environ.get(BEARER_ENV, "")
        self._region = _region(provider)
        self._credentials: Credentials | None = None if self._bearer else _env_credentials()

    def check(self, request: ModelRequest, model_id: str) -> None:
        if not plain(request):
            self._check_request(request, model_id)
        if not self._bearer:
            self._check_credentials()

    def _check_request(self, request: ModelRequest, model_id: str) -> None:
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id)
        c = request.controls
        if c.tool_choice is not None and c.tool_choice.mode == "none":
            rule = "Converse has no tool choice none: send the request without its tools"
            raise InvalidInput("tool_choice.mode", "none", rule)
        if c.reasoning is not None and c.reasoning.budget_tokens is None:
            rule = "Converse asks for thinking with a token budget (additionalModelRequestFields): give budget_tokens"
            raise InvalidInput("reasoning.effort", c.reasoning.effort, rule)
        for i, m in enumerate(request.messages):
            for j, part in enumerate(m.parts):
                at = f"messages[{i}].parts[{j}]"
                if m.role is Role.ASSISTANT and not isinstance(part, TextPart):
                    raise InvalidInput(at, type(part).__name__, "an assistant message carries text parts only")
                _check_part(at, part)
            for k, r in enumerate(m.tool_results):
                for j, part in enumerate(r.parts):
                    _check_part(f"messages[{i}].tool_results[{k}].parts[{j}]", part)
        provider_options(c.provider_options_json)

    def _check_credentials(self) -> None:
        if self._credentials is None:
            reason = (
                f"no AWS credentials: set {BEARER_ENV} (or the provider's api_key) for a Bedrock API key, or "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for SigV4"
            )
            raise Unauthorized("Amazon Bedrock", reason)
        if not self._region:
            raise Unauthorized("Amazon Bedrock", "no AWS region to sign for: set the provider's region or AWS_REGION")

    def path(self, model: str, *, stream: bool) -> str:
        return converse_path(model, stream=stream)

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        """Bedrock tells no rate-limit budget in its headers (a ThrottlingException says to slow down)."""
        return Budget()

    def headers(self, api_key: str | None) -> dict[str, str]:
        bearer = api_key or self._bearer
        return {"authorization": f"Bearer {bearer}"} if bearer else {}

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        """``headers`` with a SigV4 signature of the request (none with a Bedrock API key: ``headers``)."""
        out = dict(headers)
        if self._bearer or self._credentials is None:
            return out
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        signed = AWSRequest(method=method, url=url, data=body, headers={k: out[k] for k in _SIGNED if k in out})
        SigV4Auth(self._credentials.get_frozen_credentials(), SERVICE, self._region).add_auth(signed)
        for name, value in signed.headers.items():
            if name.lower() not in _SIGNED:
                out[name.lower()] = value
        return out

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": render_messages(request.messages)}
        system = request.system
        if request.response_schema is not None:
            schema = json.dumps(request.response_schema, separators=(",", ":"))
            system = with_schema(system, schema)
        c = request.controls
        if system or c.system_cache is not None:
            body["system"] = [{"text": system}] if system else []
            if c.system_cache is not None:
                body["system"].append(cache_point(c.system_cache))
        inference: dict[str, Any] = {"maxTokens": request.max_tokens}
        if request.temperature is not None:
            inference["temperature"] = request.temperature
        if c.top_p is not None:
            inference["topP"] = c.top_p
        if c.stop:
            inference["stopSequences"] = list(c.stop)
        body["inferenceConfig"] = inference
        if request.tools:
            tools: list[dict[str, Any]] = []
            for t in request.tools:
                spec: dict[str, Any] = {"name": t.name}
                if t.description:
                    spec["description"] = t.description
                spec["inputSchema"] = {"json": json.loads(t.parameters_json) if t.parameters_json else EMPTY_PARAMETERS}
                tools.append({"toolSpec": spec})
                if t.cache is not None:
                    tools.append(cache_point(t.cache))
            config: dict[str, Any] = {"tools": tools}
            choice = c.tool_choice
            if choice is not None and choice.mode == "tool":
                config["toolChoice"] = {"tool": {"name": choice.name}}
            elif choice is not None:
                config["toolChoice"] = {_CHOICES[choice.mode]: {}}
            body["toolConfig"] = config
        options = provider_options(c.provider_options_json)
        extra = dict(options.pop("additionalModelRequestFields", {}))
        if c.reasoning is not None and c.reasoning.budget_tokens is not None:
            extra["thinking"] = {"type": "enabled", "budget_tokens": c.reasoning.budget_tokens}
        if extra:
            body["additionalModelRequestFields"] = extra
        return merge_options(body, options, FORMAT_NAME, SIDECAR_KEYS)

    def stream_decoder(self) -> BedrockStream:
        return BedrockStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        return parse_reply(body)

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        error_type, message = error_type_of(headers, body)
        declared = ERROR_STATUS.get(error_type)
        if declared is not None and status in (200, 500) and declared != status:
            status = declared  # a stream's exception (read as a 500): the status its type stands for
        outcome = classify_response(status, headers, body, target, secrets, now)
        if not error_type:
            return outcome
        http = outcome.http
        words = cap(redact_body(message, None, secrets)) or f"HTTP {status} {error_type}"
        signal = _RETRIED.get(error_type)
        if signal is not None:
            return Retry(signal, words, parse_retry_after(headers, now), http)
        operator = for_operator((error_type,), status, message, target, http, secrets)
        if operator is not None:  # an inference profile, a region without the model, a model not enabled
            return operator
        if error_type == "ValidationException":
            if _CONTEXT.search(message):
                return ContextOverflow(target.provider, target.model_id, words, http=http)
            rule = f"the {target.provider} provider rejected the request (HTTP {status} {error_type}: {words})"
            return InvalidInput("body", "", rule, http=http)  # Bedrock names no parameter
        if error_type in UNAUTHORIZED:
            detail = ProviderDetail(provider=target.provider, account=target.account, model=target.model_id)
            reason = f"HTTP {status} {error_type}"
            return Unauthorized(target.provider, reason, http=http, endpoint=target.endpoint, provider=detail)
        if error_type == "ResourceNotFoundException":
            return ModelNotFound.at_provider(target.provider, target.upstream_model, target.model_id, words, http=http)
        if error_type == "ServiceQuotaExceededException":
            return QuotaExhausted(target.provider, target.account, target.model_id, words, http=http)
        return outcome


def error_type_of(headers: Mapping[str, str], body: str) -> tuple[str, str]:
    """(the error type, the message) of an AWS error answer: the type from ``x-amzn-ErrorType``
    (``ThrottlingException:http://internal...``), else the body's ``__type`` / ``code``
    (``com.amazon.coral#ThrottlingException``); "" when neither says."""
    named = next((v for k, v in headers.items() if k.lower() == ERROR_HEADER), "")
    try:
        parsed: Any = loads(body)
    except ValueError:
        parsed = None
    fields = parsed if isinstance(parsed, dict) else {}
    message = text_or_empty(fields.get("message")) or text_or_empty(fields.get("Message"))
    if not named:
        named = text_or_empty(fields.get("__type")) or text_or_empty(fields.get("code"))
    return named.split(":", 1)[0].rsplit("#", 1)[-1].strip(), message


def provider_options(raw: str) -> dict[str, Any]:
    """The keys ``provider_options_json`` sets for this format (its ``"bedrock_converse"`` object); its
    additionalModelRequestFields an object, without ``thinking`` (the request's reasoning sets it)."""
    options = options_for(raw, FORMAT_NAME, SIDECAR_KEYS)
    extra = options.get("additionalModelRequestFields")
    if extra is None:
        return dict(options)
    where = f"{FIELD}.{FORMAT_NAME}.additionalModelRequestFields"
    if not isinstance(extra, dict):
        raise InvalidInput(where, json.dumps(extra)[:80], "must be an object")
    if "thinking" in extra:
        raise InvalidInput(f"{where}.thinking", "thinking", "the request's reasoning sets it: set it there")
    return dict(options, additionalModelRequestFields=dict(extra))


def _check_part(at: str, part: Any) -> None:
    if isinstance(part, ImagePart):
        if part.detail == "low":
            rule = "Converse has no low-detail look at an image: leave it unset"
            raise InvalidInput(f"{at}.detail", part.detail, rule)
        if part.url and not part.url.startswith("data:"):
            if not part.url.startswith("s3://") or not url_format(part.url):
                rule = "Converse takes an image's bytes or an s3:// URL ending in .png, .jpg, .gif or .webp"
                raise InvalidInput(f"{at}.url", part.url[:80], rule)
            return
        if part.url:
            inline = read_data_url(part.url)
            if inline is None:
                raise InvalidInput(f"{at}.url", part.url[:80], "a data: URL is data:<media type>;base64,<data>")
            media_type = inline[0]
        else:
            media_type = part.media_type
        if media_type not in IMAGE_FORMATS:
            raise InvalidInput(f"{at}.media_type", media_type, f"Converse takes {', '.join(IMAGE_FORMATS)} images")
    if isinstance(part, DocumentPart):
        if part.text is None and (part.media_type or PDF) != PDF:
            raise InvalidInput(f"{at}.media_type", part.media_type, "a document given as data is a PDF for Converse")
        if part.title and not _NAME.match(part.title):
            rule = "Converse names a document with letters, digits, hyphens, parentheses, brackets and single spaces"
            raise InvalidInput(f"{at}.title", part.title, rule)


# ---------------------------------------------------------------------------- a request rendered


def _content(m: Message, beside: bool) -> list[Mapping[str, Any]]:
    """A message's parts as blocks, else its text (none when empty ``beside`` tool calls or results)."""
    if m.parts:
        return [block for n, part in enumerate(m.parts) for block in content_block(part, n)]
    return [{"text": m.text}] if m.text or not beside else []


def _result(r: ToolCallResult) -> Mapping[str, Any]:
    if r.parts:  # a tool result's content holds no cachePoint
        content = [b for n, part in enumerate(r.parts) for b in content_block(part, n) if "cachePoint" not in b]
    else:
        content = [{"text": r.content}]
    return {"toolResult": {"toolUseId": r.call_id, "content": content, "status": "error" if r.is_error else "success"}}


def _blocks(m: Message) -> list[Mapping[str, Any]]:
    if m.role is Role.ASSISTANT:
        return [*reasoning_blocks(m.reasoning), *_content(m, bool(m.tool_calls)), *tool_use_blocks(m.tool_calls)]
    return [*(_result(r) for r in m.tool_results), *_content(m, bool(m.tool_results))]


def render_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The conversation as ``messages`` (the module's table): consecutive messages of one role merged."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = "assistant" if m.role is Role.ASSISTANT else "user"
        blocks = _blocks(m)
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return out
