"""The OpenAI Responses upstream (``POST {base}/responses``), whole and streamed, always stateless.

Every request is ``store: false`` with ``include: ["reasoning.encrypted_content"]`` and never a
``previous_response_id``: the whole conversation goes each time, reasoning items included, so a
retry or a route's failover hop depends on nothing held at one provider. ``ResponsesUpstream.body``
renders a ChatRequest in the shapes ``front.py`` reads back (``shapes.Request``; ``items.py`` renders
the input items)::

    core (ChatRequest)                          Responses body
    system                                      instructions
    Message(USER, text | parts)                 a user message: its text, or input_text / input_image (a data:
                                                URL or the URL; detail or "auto") / input_file parts (a PDF as a
                                                data: URL named by its title or DEFAULT_FILENAME, or its URL)
    Message(ASSISTANT, reasoning, text | text   the reasoning items (``vocab``'s table), an assistant message
      parts, tool_calls)                        (when it has text: a string or output_text parts), then a
                                                function_call item per call
    Message(TOOL, tool_results)                 a function_call_output item per result: its content, or its
                                                parts as input_text / input_image; TOOL_ERROR_PREFIX before an
                                                error; then the message's own text, if any, as a user message
    tools (tools.strict)                        flat function tools (strict false unless the definition asks
                                                true: the API's own default is true)
    response schema                             text.format json_schema, named "response", strict false
    max_tokens, temperature, top_p,             max_output_tokens and the same names
      parallel_tool_calls, tool_choice
    reasoning                                   reasoning {"effort": the effort, or the level of
                                                ``vocab.effort_for_budget``, "summary": "auto"}
    end_user                                    safety_identifier
    provider_options_json {"openai_responses"}  its keys merged into the body (``service_tier``,
                                                ``prompt_cache_key``, ``truncation`` ...); ``store``,
                                                ``previous_response_id`` and ``conversation`` refused

Not carried, so refused by name before sending: stop, seed, presence / frequency penalties and top_k
(the Responses API has none of them), cache breakpoints (OpenAI caches by itself; usage reports the
cached tokens), a plain-text document, an assistant's image or document, a document in a tool result.

A reply (``parse``; read tolerantly: what is not what the wire sends is skipped)::

    output[]: message                   its output_text parts -> text; a refusal part -> the refusal
    output[]: function_call             a tool call
    output[]: reasoning                 reasoning (``vocab``'s table; format "openai_responses")
    status, incomplete_details.reason   the finish (``vocab``'s table)
    usage                               the token counts (cached and cache-written input, reasoning output)
    model, id                           the reply's model and id

A 200 whose ``error`` is set (a response that ``failed``) is an error answer (``providers.client``).

A stream is named events, each data object carrying its ``type`` (read by ``ResponsesStream``)::

    event                                       becomes
    response.created, .in_progress              the model and the id
    response.output_item.added (function_call)  ToolCallDelta: its call_id and name (arguments, if any)
    response.output_item.added (reasoning)      a new reasoning part
    response.output_text.delta                  TextDelta
    response.refusal.delta                      kept for the refusal (never sent as text)
    response.function_call_arguments.delta      ToolCallDelta: an arguments fragment of the item's call
    response.reasoning_summary_part.added       a new reasoning part (its item's second summary and on)
    response.reasoning_summary_text.delta       ReasoningDelta: text of the part
    response.output_item.done (reasoning)       ReasoningDelta: the item's signature (id, encrypted content)
    response.completed, response.incomplete     the end: the reply is the event's response (its output
                                                items, else what the deltas made), its finish and usage
    response.failed                             StreamFault with ``{"error": response.error}`` (classified)
    error                                       StreamFault with ``{"error": {code, message, param}}``
    not JSON, not an object                     StreamFault (garbled)
    anything else                               ignored (content_part, *.done, new event types)

Error answers (and a stream's error events): a content-policy refusal first (``vocab.error_refusal``:
PROVIDER_REFUSAL, never retried, whatever the status); then an error that came in a 200 (a failed
response, a stream's error event, read as a 500) takes the status its ``code`` names (``_CODE_STATUS``);
then ``providers.errors.classify_response``, as for Chat Completions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sidecar.core.conversation import (
    Controls,
    DocumentPart,
    ModelRequest,
    ReasoningPart,
    TextPart,
    ToolCall,
)
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.errors import Target, classify_response, refused
from sidecar.providers.formats.azure import RESPONSES, AzureWire
from sidecar.providers.formats.carried import asked, merge_carried, plain, refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.openai_chat.vocab import rate_budget
from sidecar.providers.formats.openai_responses.items import input_items
from sidecar.providers.formats.openai_responses.shapes import Request
from sidecar.providers.formats.openai_responses.vocab import (
    FORMAT_NAME,
    INCLUDE,
    INCOMPLETE,
    RESPONSES_PATH,
    effort_for_budget,
    error_refusal,
    parts_of_item,
    signature_of,
)
from sidecar.providers.formats.options import merge_options, options_for
from sidecar.providers.formats.protocol import SSE
from sidecar.providers.formats.shapes import declared

__all__ = [
    "SIDECAR_KEYS",
    "ResponsesStream",
    "ResponsesUpstream",
    "provider_options",
    "read_response",
]

SIDECAR_KEYS = declared(Request) - {"store"}
"""The body keys the sidecar sets itself, the front's (``store``: refused with its reason): refused in
``provider_options_json`` (set the request's own field)."""
_REFUSED_OPTIONS = {
    "store": "the sidecar runs the Responses API stateless (store: false): a retry or a failover hop must not "
    "depend on a response held at one provider",
    "previous_response_id": "the sidecar sends the whole conversation every time (store: false)",
    "conversation": "the sidecar sends the whole conversation every time (store: false)",
}
_CACHE = "OpenAI caches a prompt by itself, with no breakpoints (usage reports the cached tokens)"
_WHY: Mapping[str, str] = {
    "parts.cache": _CACHE,
    "tools.cache": _CACHE,
    "system_cache": _CACHE,
    "stop": "the Responses API has no stop sequences",
    "seed": "the Responses API has no seed",
    "presence_penalty": "the Responses API has no presence_penalty",
    "frequency_penalty": "the Responses API has no frequency_penalty",
    "top_k": "the Responses API has no top_k",
    "parts.text_document": "the Responses API takes a file as a PDF: send the text as a text part",
}
"""Why the format does not carry a feature, for the refusal's words."""
_CODE_STATUS: Mapping[str, int] = {
    "rate_limit_exceeded": 429,
    "context_length_exceeded": 400,
    "invalid_prompt": 400,
    "server_error": 500,
}
"""The status an error that came in a 200 (a failed response, a stream's error event) stands for, by its code."""


class ResponsesUpstream:
    """The sidecar as a Responses API client (the module's tables); with ``azure``, Azure OpenAI's URLs
    and credential (``formats.azure``)."""

    def __init__(self, azure: AzureWire | None = None) -> None:
        self.azure = azure

    carries: frozenset[str] = frozenset(
        {
            "parts.text",
            "parts.image",
            "parts.document",
            "parts.document_url",
            "tool_results.parts",
            "tool_results.image",
            "reasoning.history",
            "tools.strict",
            "reasoning",
            "tool_choice",
            "parallel_tool_calls",
            "top_p",
            "end_user",
            "provider_options_json",
        }
    )

    def check(self, request: ModelRequest, model_id: str) -> None:
        if plain(request):
            return
        for feature, field in asked(request):
            if feature in _WHY:
                raise InvalidInput(
                    field,
                    feature,
                    f"model {model_id} speaks the {FORMAT_NAME} wire format, which does not carry {feature}: "
                    f"{_WHY[feature]} (docs/carried.md)",
                )
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id)
        for i, m in enumerate(request.messages):
            for j, thought in enumerate(m.reasoning):
                if j == 0 and not (thought.signature or thought.redacted_data):
                    rule = "a reasoning item goes back with its id and encrypted content (the signature)"
                    raise _rule(f"messages[{i}].reasoning[{j}].signature", "", model_id, rule)
            if m.role is Role.ASSISTANT:
                for j, part in enumerate(m.parts):
                    if not isinstance(part, TextPart):
                        rule = "an assistant message carries text parts only"
                        raise _rule(f"messages[{i}].parts[{j}]", type(part).__name__, model_id, rule)
            for j, r in enumerate(m.tool_results):
                for k, part in enumerate(r.parts):
                    if isinstance(part, DocumentPart):
                        rule = "a function_call_output carries text and images"
                        raise _rule(f"messages[{i}].tool_results[{j}].parts[{k}]", "document", model_id, rule)
        c = request.controls
        if not request.tools:
            for name, value in (("tool_choice", c.tool_choice), ("parallel_tool_calls", c.parallel_tool_calls)):
                if value is not None:
                    raise _rule(name, name, model_id, f"OpenAI takes {name} only with tools")
        if c.reasoning is not None and request.temperature not in (None, 1.0):
            rule = "OpenAI's reasoning models take only the default temperature (1): leave it unset with reasoning"
            raise _rule("temperature", str(request.temperature), model_id, rule)
        provider_options(c)

    def path(self, model: str, *, stream: bool) -> str:
        return RESPONSES_PATH if self.azure is None else self.azure.path(model, RESPONSES)

    def headers(self, api_key: str | None) -> dict[str, str]:
        if self.azure is not None:
            return self.azure.headers(api_key)
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        return rate_budget(headers)

    stream_type = SSE

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        return dict(headers)  # the key is a header (``headers``): nothing covers the request itself

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.upstream_model, "input": input_items(request.messages)}
        if request.system:
            body["instructions"] = request.system
        body["max_output_tokens"] = request.max_tokens
        body["store"] = False
        body["include"] = [INCLUDE]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                merge_carried(
                    {
                        "type": "function",
                        "name": t.name,
                        "description": t.description,
                        "parameters": json.loads(t.parameters_json) if t.parameters_json else _EMPTY,
                        "strict": t.strict is True,  # unset: false, not the API's default true
                    },
                    t.carried,
                    FORMAT_NAME,
                )
                for t in request.tools
            ]
        if request.response_schema is not None:
            schema = {"type": "json_schema", "name": "response", "schema": request.response_schema, "strict": False}
            body["text"] = {"format": schema}
        body.update(_controls(request.controls))
        if stream:
            body["stream"] = True
        merge_options(body, provider_options(request.controls), FORMAT_NAME, SIDECAR_KEYS)
        return merge_carried(body, request.carried, FORMAT_NAME)

    def stream_decoder(self) -> ResponsesStream:
        return ResponsesStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        return read_response(body)

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        refusal = error_refusal(body)
        if refusal is not None:
            return refused(status, headers, body, target, secrets, *refusal)
        if status in (200, 500):
            status = _CODE_STATUS.get(_error_code(body), status)
        return classify_response(status, headers, body, target, secrets, now)


_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _error_code(body: str) -> str:
    try:
        parsed: Any = loads(body)
    except ValueError:
        return ""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return text_or_empty(error.get("code")) if isinstance(error, dict) else ""


def _rule(field: str, value: str, model_id: str, rule: str) -> InvalidInput:
    return InvalidInput(field, value, f"model {model_id} speaks the {FORMAT_NAME} wire format: {rule}")


def provider_options(controls: Controls) -> dict[str, Any]:
    """The keys ``provider_options_json`` merges into a Responses body (its ``"openai_responses"`` object)."""
    return options_for(controls.provider_options_json, FORMAT_NAME, SIDECAR_KEYS, _REFUSED_OPTIONS)


# ---------------------------------------------------------------------------- the body


def _controls(c: Controls) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.reasoning is not None:
        budget = c.reasoning.budget_tokens
        effort = c.reasoning.effort if budget is None else effort_for_budget(budget)
        out["reasoning"] = {"effort": effort, "summary": "auto"}
    if c.tool_choice is not None:
        mode = c.tool_choice.mode
        out["tool_choice"] = {"type": "function", "name": c.tool_choice.name} if mode == "tool" else mode
    if c.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = c.parallel_tool_calls
    if c.top_p is not None:
        out["top_p"] = c.top_p
    if c.end_user:
        out["safety_identifier"] = c.end_user
    return out


# ---------------------------------------------------------------------------- a reply read


def _read_usage(usage: Any, reply: ChatReply) -> None:
    if not isinstance(usage, dict):
        return
    reply.input_tokens = count(usage.get("input_tokens")) or reply.input_tokens
    reply.output_tokens = count(usage.get("output_tokens")) or reply.output_tokens
    details = usage.get("input_tokens_details")
    if isinstance(details, dict):
        reply.cache_read_input_tokens = count(details.get("cached_tokens")) or reply.cache_read_input_tokens
        reply.cache_write_input_tokens = count(details.get("cache_write_tokens")) or reply.cache_write_input_tokens
    details = usage.get("output_tokens_details")
    if isinstance(details, dict):
        reply.reasoning_tokens = count(details.get("reasoning_tokens")) or reply.reasoning_tokens


def _reasoning_of(item: Mapping[str, Any]) -> list[ReasoningPart]:
    """A reasoning item as its parts (``vocab``'s table)."""
    summary = item.get("summary")
    texts = [text_or_empty(s.get("text")) for s in summary if isinstance(s, dict)] if isinstance(summary, list) else []
    item_id, encrypted = text_or_empty(item.get("id")), text_or_empty(item.get("encrypted_content"))
    return parts_of_item(item_id, encrypted, texts, FORMAT_NAME)


def _finish(response: Mapping[str, Any], calls: bool) -> tuple[FinishReason, str]:
    status = text_or_empty(response.get("status"))
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = text_or_empty(details.get("reason")) if isinstance(details, dict) else ""
        return INCOMPLETE.get(reason, FinishReason.UNSPECIFIED), reason or status
    if status == "completed":
        return (FinishReason.TOOL_CALLS if calls else FinishReason.STOP), status
    return FinishReason.UNSPECIFIED, status


def read_response(body: Mapping[str, Any]) -> ChatReply:
    """A Response object as the core's reply (the module's table)."""
    output = body.get("output")
    if not isinstance(output, list):
        raise ValueError("the response has no output list")
    text: list[str] = []
    refusal: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    text.append(text_or_empty(part.get("text")))
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    refusal.append(text_or_empty(part.get("refusal")))
        elif kind == "function_call":
            arguments = text_or_empty(item.get("arguments")) or "{}"
            calls.append(ToolCall(text_or_empty(item.get("call_id")), text_or_empty(item.get("name")), arguments))
        elif kind == "reasoning":
            reasoning += _reasoning_of(item)
    finish, raw = _finish(body, bool(calls))
    filtered = finish is FinishReason.CONTENT_FILTER
    reply = ChatReply(
        text="".join(text),
        tool_calls=calls,
        finish=finish,
        raw_finish=raw,
        refusal="".join(refusal) if refusal else ("".join(text) or None if filtered else None),
        response_model=text_or_empty(body.get("model")),
        response_id=text_or_empty(body.get("id")),
        reasoning=reasoning,
        refusal_category="content_filter" if filtered else "",
    )
    _read_usage(body.get("usage"), reply)
    return reply


# ---------------------------------------------------------------------------- streams


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.id, self.name = call_id, name
        self.arguments: list[str] = []


class ResponsesStream:
    """One streamed Responses reply, event by event (the module's table)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[str, _Call] = {}
        """Tool calls by their item's id (or output index), in the order they were added."""
        self._reasoning: list[list[str]] = []
        """Each reasoning part: [text, signature]."""
        self._items: dict[str, int] = {}
        """A reasoning item's id (or output index) -> its first part."""
        self._final: dict[str, Any] | None = None
        self.model = ""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if not data.strip():
            return []
        try:
            body = loads(data)
        except ValueError:
            raise StreamFault("the stream sent an event that is not JSON") from None
        if not isinstance(body, dict):
            raise StreamFault("the stream sent an event that is not a JSON object")
        kind = text_or_empty(body.get("type")) or event
        if kind == "error":
            error = {k: body.get(k) for k in ("code", "message", "param")}
            raise StreamFault("the stream sent an error event", error_body=json.dumps({"error": error}))
        if "error" in body and kind not in _RESPONSE_EVENTS and body.get("error") is not None:
            raise StreamFault("the stream sent an error", error_body=data)
        response = body.get("response")
        if kind in _RESPONSE_EVENTS and isinstance(response, dict):
            return self._response(kind, response)
        item = body.get("item")
        key = text_or_empty(body.get("item_id")) or (text_or_empty(item.get("id")) if isinstance(item, dict) else "")
        key = key or str(body.get("output_index", ""))
        if kind == "response.output_text.delta":
            delta = text_or_empty(body.get("delta"))
            if delta:
                self._text.append(delta)
                return [TextDelta(delta)]
            return []
        if kind == "response.refusal.delta":
            self._refusal.append(text_or_empty(body.get("delta")))
            return []
        if kind == "response.function_call_arguments.delta":
            return self._arguments(key, text_or_empty(body.get("delta")))
        if kind == "response.reasoning_summary_part.added":
            index = count(body.get("summary_index"))
            if key in self._items and index > 0:
                self._reasoning.append(["", ""])
            return []
        if kind == "response.reasoning_summary_text.delta":
            return self._summary(key, count(body.get("summary_index")), text_or_empty(body.get("delta")))
        if kind in ("response.output_item.added", "response.output_item.done") and isinstance(item, dict):
            return self._item(key, item, done=kind.endswith("done"))
        return []

    def _response(self, kind: str, response: dict[str, Any]) -> list[Delta]:
        self.model = text_or_empty(response.get("model")) or self.model
        self._id = text_or_empty(response.get("id")) or self._id
        if kind == "response.failed":
            error = response.get("error")
            error = error if isinstance(error, dict) else {"message": "the response failed", "code": "server_error"}
            raise StreamFault("the response failed", error_body=json.dumps({"error": error}))
        if kind in ("response.completed", "response.incomplete"):
            self._final = response
            self.complete = True
        return []

    def _item(self, key: str, item: dict[str, Any], *, done: bool) -> list[Delta]:
        kind = item.get("type")
        if kind == "function_call":
            if key not in self._calls:
                call = self._calls[key] = _Call(text_or_empty(item.get("call_id")), text_or_empty(item.get("name")))
                out: list[Delta] = [ToolCallDelta(len(self._calls) - 1, call.id, call.name, "")]
                arguments = text_or_empty(item.get("arguments"))
                return out + self._arguments(key, arguments) if arguments else out
            call = self._calls[key]
            whole = text_or_empty(item.get("arguments"))
            sent = "".join(call.arguments)
            if done and whole.startswith(sent) and len(whole) > len(sent):  # arguments that were not streamed
                return self._arguments(key, whole[len(sent) :])
            return []
        if kind != "reasoning":
            return []
        if key not in self._items:
            self._items[key] = len(self._reasoning)
            self._reasoning.append(["", ""])
        if not done:
            return []
        first = self._items[key]
        signature = signature_of(text_or_empty(item.get("id")), text_or_empty(item.get("encrypted_content")))
        self._reasoning[first][1] = signature
        return [ReasoningDelta(first, signature=signature)] if signature else []

    def _arguments(self, key: str, fragment: str) -> list[Delta]:
        call = self._calls.get(key)
        if call is None or not fragment:
            return []
        call.arguments.append(fragment)
        return [ToolCallDelta(list(self._calls).index(key), "", "", fragment)]

    def _summary(self, key: str, summary_index: int, text: str) -> list[Delta]:
        if key not in self._items:
            self._items[key] = len(self._reasoning)
            self._reasoning.append(["", ""])
        index = min(self._items[key] + summary_index, len(self._reasoning) - 1)
        if not text:
            return []
        self._reasoning[index][0] += text
        return [ReasoningDelta(index, text=text)]

    def reply(self) -> ChatReply | None:
        final = self._final
        if final is None:
            return None
        output = final.get("output")
        if isinstance(output, list) and output:
            return read_response(final)  # the completed response holds every item whole
        calls = [ToolCall(c.id, c.name, "".join(c.arguments) or "{}") for c in self._calls.values()]
        finish, raw = _finish(final, bool(calls))
        reply = ChatReply(
            text="".join(self._text),
            tool_calls=calls,
            finish=finish,
            raw_finish=raw,
            refusal="".join(self._refusal) if self._refusal else None,
            response_model=self.model,
            response_id=self._id,
            reasoning=[ReasoningPart(t, s, "", FORMAT_NAME) for t, s in self._reasoning],
            refusal_category="content_filter" if finish is FinishReason.CONTENT_FILTER else "",
        )
        _read_usage(final.get("usage"), reply)
        return reply


_RESPONSE_EVENTS = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
"""The events whose data holds the whole ``response`` (its ``error`` read only when it failed)."""
