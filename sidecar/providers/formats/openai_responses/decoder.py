"""A Responses reply as the upstream reads it, whole and streamed: tolerantly (what is not what the wire sends
is skipped; ``shapes`` declares what the front writes, not what a provider may)::

    output[]: message                   its output_text parts -> text; a refusal part -> the refusal
    output[]: function_call             a tool call
    output[]: reasoning                 reasoning (``vocab``'s table; format "openai_responses")
    status, incomplete_details.reason   the finish (``vocab``'s table)
    usage                               the token counts (cached and cache-written input, reasoning output)
    model, id                           the reply's model and id

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import ReasoningPart, ToolCall
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.providers.formats.chat import CallPieces, ChatReply, StreamFault, event_object
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.openai_responses.vocab import FORMAT_NAME, INCOMPLETE, parts_of_item, signature_of

__all__ = ["ResponsesStream", "read_response"]


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


# ---------------------------------------------------------------------------- a stream read


class ResponsesStream:
    """One streamed Responses reply, event by event (the module's table)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[str, CallPieces] = {}
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
        body = event_object(data)
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
                call = self._calls[key] = CallPieces(
                    text_or_empty(item.get("call_id")), text_or_empty(item.get("name"))
                )
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
        calls = [c.call() for c in self._calls.values()]
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
