"""The answer the Responses front renders, whole and streamed, in ``shapes``' reply types (``front.py`` uses it).

ChatReply                      a Response: the reasoning items (``items.reasoning_items``), a message
                               (output_text | refusal), the function_call items; completed, or
                               incomplete with its reason (``vocab``'s table)
a stream (ResponsesWriter)     response.created, response.in_progress; each item's output_item.added,
                               its deltas (output_text, refusal, function_call_arguments,
                               reasoning_summary_text), their *.done events and output_item.done; then
                               response.completed (or .incomplete), the whole Response; each event
                               numbered (``sequence_number``)
  the sidecar's restart        an event ``sidecar.restart`` (clients skip event types they do not know)
  a failure                    an ``error`` event {"type": "error", "code", "message", "param"}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from typing_extensions import Unpack

from sidecar.core.conversation import ToolCall
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.openai_responses import shapes
from sidecar.providers.formats.openai_responses.items import reasoning_items
from sidecar.providers.formats.openai_responses.vocab import FINISH_NAMES, REDACTED_ID, item_of
from sidecar.providers.formats.protocol import ReplyHead, Sse

__all__ = ["ResponsesWriter", "output_items", "response_object"]


def usage_of(reply: ChatReply) -> shapes.Usage:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {
            "cached_tokens": reply.cache_read_input_tokens,
            "cache_write_tokens": reply.cache_write_input_tokens,
        },
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def response_object(
    reply: ChatReply | None,
    head: ReplyHead,
    output: list[shapes.OutputItem],
    status: str,
    extension: Mapping[str, Any] | None = None,
) -> shapes.Response:
    """The Response object: ``reply`` None for the one a stream opens with (``status`` in_progress)."""
    incomplete = None
    if reply is not None:
        reason = FINISH_NAMES.get(reply.finish)
        status = "incomplete" if reason is not None and reply.refusal is None else "completed"
        incomplete = {"reason": reason} if reason is not None and reply.refusal is None else None
    out: shapes.Response = {
        "id": head.reply_id,
        "object": "response",
        "created_at": head.created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "model": head.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": None,
        "store": False,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": None if reply is None else usage_of(reply),
        "metadata": {},
    }
    if extension is not None:
        out["sidecar"] = dict(extension)
    return out


def output_items(reply: ChatReply, head: ReplyHead) -> list[shapes.OutputItem]:
    """A reply's output items: its reasoning, its message, its calls."""
    out: list[shapes.OutputItem] = []
    for made in reasoning_items(reply.reasoning):
        item = cast(shapes.OutputReasoning, made)
        out.append(
            {**item, "status": "completed"} if "encrypted_content" in item else {**item, "encrypted_content": None}
        )
    if reply.refusal is not None:
        out.append(_message(head, [{"type": "refusal", "refusal": reply.refusal}], "completed"))
    elif reply.text:
        out.append(_message(head, [_text_part(reply.text)], "completed"))
    out += [_call(head, c, i, c.arguments_json or "{}", "completed") for i, c in enumerate(reply.tool_calls)]
    return out


def _text_part(text: str) -> shapes.OutputText:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message(head: ReplyHead, content: list[shapes.OutputText | shapes.Refusal], status: str) -> shapes.OutputMessage:
    return {"type": "message", "id": f"msg_{head.reply_id}", "role": "assistant", "status": status, "content": content}


def _call(head: ReplyHead, c: ToolCall, index: int, arguments: str, status: str) -> shapes.OutputCall:
    return {"type": "function_call", "id": f"fc_{head.reply_id}_{index}", "call_id": c.id, "name": c.name,
            "arguments": arguments, "status": status}  # fmt: skip


class ResponsesWriter:
    """One streamed reply as Responses events (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._seq = 0
        self._open: shapes.OutputItem | None = None
        """The output item being streamed (its deltas so far in it)."""
        self._index = -1
        """Its output index."""
        self._calls = 0
        self._items = 0
        """Reasoning items begun."""
        self._first = 0
        """The core's index of the open reasoning item's first part."""
        self._signed = False
        """The open reasoning item has its id and encrypted content."""
        self._done: list[shapes.OutputItem] = []

    def _event(self, kind: str, at: shapes.Event | None = None, /, **fields: Unpack[shapes.Event]) -> Sse:
        """An event: its type, its number, the item it is about (``at``) and its ``fields``."""
        data: dict[str, Any] = {"type": kind, "sequence_number": self._seq, **(at or {}), **fields}
        self._seq += 1
        return (kind, data)

    def _close(self) -> list[Sse]:
        item, self._open = self._open, None
        if item is None:
            return []
        out: list[Sse] = []
        at: shapes.Event = {"item_id": item["id"], "output_index": self._index}
        if item["type"] == "message":
            part = item["content"][0]
            if part["type"] == "output_text":
                out.append(self._event("response.output_text.done", at, content_index=0, text=part["text"],
                                       logprobs=[]))  # fmt: skip
            else:
                out.append(self._event("response.refusal.done", at, content_index=0, refusal=part["refusal"]))
            out.append(self._event("response.content_part.done", at, content_index=0, part=part))
        elif item["type"] == "function_call":
            out.append(self._event("response.function_call_arguments.done", at, arguments=item["arguments"],
                                   name=item["name"]))  # fmt: skip
        else:
            for k, s in enumerate(item["summary"]):
                out.append(self._event("response.reasoning_summary_text.done", at, summary_index=k, text=s["text"]))
                out.append(self._event("response.reasoning_summary_part.done", at, summary_index=k, part=s))
            item.setdefault("encrypted_content", None)
        item["status"] = "completed"
        self._done.append(item)
        out.append(self._event("response.output_item.done", output_index=self._index, item=item))
        return out

    def _begin(self, item: shapes.OutputItem) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._open = item
        added: shapes.OutputItem = {**item, "content": []} if item["type"] == "message" else item.copy()
        out.append(self._event("response.output_item.added", output_index=self._index, item=added))
        return out

    def start(self, input_tokens: int = 0) -> list[Sse]:
        opened = response_object(None, self._head, [], "in_progress")
        return [
            self._event("response.created", response=opened),
            self._event("response.in_progress", response=opened),
        ]

    def _text(self, kind: Literal["output_text", "refusal"], text: str) -> list[Sse]:
        out: list[Sse] = []
        item = self._open
        if item is None or item["type"] != "message" or item["content"][0]["type"] != kind:
            part: shapes.OutputText | shapes.Refusal = (
                _text_part("") if kind == "output_text" else {"type": "refusal", "refusal": ""}
            )
            item = _message(self._head, [part], "in_progress")
            out += self._begin(item)
            out.append(self._event("response.content_part.added", item_id=item["id"], output_index=self._index,
                                   content_index=0, part=part.copy()))  # fmt: skip
        part = item["content"][0]
        at: shapes.Event = {"item_id": item["id"], "output_index": self._index, "content_index": 0}
        if part["type"] == "output_text":
            part["text"] += text
            out.append(self._event("response.output_text.delta", at, delta=text, logprobs=[]))
        else:
            part["refusal"] += text
            out.append(self._event("response.refusal.delta", at, delta=text))
        return out

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, TextDelta):
            return self._text("output_text", delta.text) if delta.text else []
        if isinstance(delta, ReasoningDelta):
            return self._thought(delta)
        out: list[Sse] = []
        if delta.id or delta.name:
            out += self._begin(_call(self._head, ToolCall(delta.id, delta.name, ""), self._calls, "", "in_progress"))
            self._calls += 1
        item = self._open
        if item is None or item["type"] != "function_call" or not delta.arguments_fragment:
            return out
        item["arguments"] += delta.arguments_fragment
        out.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                               output_index=self._index, delta=delta.arguments_fragment))  # fmt: skip
        return out

    def _thought(self, delta: ReasoningDelta) -> list[Sse]:
        """A reasoning part's delta: a part past a signed item begins the next item; one within an unsigned
        item is its next summary part."""
        out: list[Sse] = []
        item = self._open
        if item is None or item["type"] != "reasoning" or (self._signed and delta.index > self._first):
            item = {"type": "reasoning", "id": f"rs_{self._head.reply_id}_{self._items}", "summary": []}
            self._items += 1
            out += self._begin(item)
            self._first, self._signed = delta.index, False
        at: shapes.Event = {"item_id": item["id"], "output_index": self._index}
        if delta.text:
            k = max(delta.index - self._first, 0)
            while len(item["summary"]) <= k:
                item["summary"].append({"type": "summary_text", "text": ""})
                out.append(self._event("response.reasoning_summary_part.added", at,
                                       summary_index=len(item["summary"]) - 1,
                                       part={"type": "summary_text", "text": ""}))  # fmt: skip
            item["summary"][k]["text"] += delta.text
            out.append(self._event("response.reasoning_summary_text.delta", at, summary_index=k, delta=delta.text))
        if delta.redacted_data:
            item["id"], item["encrypted_content"] = f"{REDACTED_ID}{self._items - 1}", delta.redacted_data
        elif delta.signature:
            item["id"], item["encrypted_content"] = item_of(delta.signature, self._items - 1)
        self._signed = self._signed or bool(delta.redacted_data or delta.signature)
        return out

    def refusal(self, text: str) -> list[Sse]:
        return self._text("refusal", text)

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._open, self._index, self._calls, self._items, self._done = None, -1, 0, 0, []
        return [self._event("sidecar.restart", restart=dict(words))]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        out = self._close()
        response = response_object(reply, self._head, self._done, "", extension)
        out.append(self._event(f"response.{response['status']}", response=response))
        return out

    def error(self, body: dict[str, Any]) -> list[Sse]:
        error = body.get("error")
        error = error if isinstance(error, dict) else {}
        fields: shapes.Event = {"code": error.get("code"), "param": error.get("param")}
        fields["message"] = str(error.get("message") or "")
        if "sidecar" in error:
            fields["sidecar"] = error["sidecar"]
        return [self._event("error", **fields)]
