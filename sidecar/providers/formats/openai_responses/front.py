"""The OpenAI Responses front (``POST /v1/responses``): a request read, the answer rendered (whole, streamed, failed).

The sidecar is stateless: it keeps no response to continue from. So a request that asks it to
(``previous_response_id``, ``conversation``, ``store: true``, ``background: true``) is refused, 400
naming the key; the caller sends the whole conversation, as the upstream half does.

``ResponsesFront.parse`` reads a request into the core's (the inverse of ``upstream.ResponsesUpstream.body``)::

    request key                    what is read
    model                          the model id asked for (a catalog model or a route)
    input                          a string (one user message), or items in order:
      {"role", "content"}            a message ("type": "message" or none): system / developer -> the
                                     system prompt; user -> text (a string, or input_text / input_image /
                                     input_file parts); assistant -> text (a string, or output_text parts;
                                     a refusal part's words as its text; id, status, annotations set aside)
      {"type": "function_call"}      a tool call of the assistant turn it follows (call_id, name, arguments)
      {"type": "function_call_output"} a tool result (output: a string, or input_text / input_image parts;
                                     TOOL_ERROR_PREFIX marks an error)
      {"type": "reasoning"}          reasoning of the next assistant turn (``vocab``'s table: id,
                                     encrypted_content, summary, byte-identical)
    instructions                   the system prompt (before the system messages of ``input``)
    tools                          [{"type": "function", "name", "description", "parameters", "strict"}]
                                   (strict carried: ToolDefinition.strict, unset when absent; a deployment
                                   whose format has no strict mode refuses true, docs/carried.md tools.strict)
    tool_choice                    "auto" | "none" | "required" | {"type": "function", "name"}; with
                                   parallel_tool_calls, only when tools are given
    text.format                    json_schema -> its schema; json_object -> {"type": "object"}; text: none
                                   (strict true or false: every reply is validated against the schema
                                   and corrected, docs/carried.md)
    max_output_tokens              the output budget (at least 1)
    temperature, top_p,            the same controls
      parallel_tool_calls
    reasoning                      effort (minimal, low, medium, high); summary read and implied
    safety_identifier, user        end_user
    store                          false only; include: "reasoning.encrypted_content" only (always sent)
    stream                         a streamed answer
    any other key                  INVALID_INPUT naming it (previous_response_id, conversation, background,
                                   metadata, ...): nothing is accepted and then dropped. A key whose
                                   value is null is absent.

``render``, ``writer`` and ``error_body`` answer in the format::

    ChatReply                      {"object": "response", "status", "incomplete_details", "output": [reasoning
                                   items, a message {output_text | refusal}, function_call items], "usage",
                                   "error": null, ...}
    a stream                       response.created, response.in_progress; each item's
                                   response.output_item.added, its deltas (response.output_text.delta,
                                   response.refusal.delta, response.function_call_arguments.delta,
                                   response.reasoning_summary_text.delta), its *.done events and
                                   response.output_item.done; then response.completed (or
                                   response.incomplete) with the whole response; every event numbered
                                   (``sequence_number``)
      the sidecar's restart        an event ``sidecar.restart`` (clients skip event types they do not know)
    a failure                      {"error": {"message", "type", "param", "code"}} (Chat Completions'); in a
                                   stream, an ``error`` event {"type": "error", "code", "message", "param"}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sidecar.core.conversation import (
    Controls,
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    Part,
    Reasoning,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
)
from sidecar.core.kinds import Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.carried import Unknown, kept
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import (
    bool_field,
    number_field,
    optional_bool,
    positive_budget,
    schema_text,
    shown,
    text_field,
)
from sidecar.providers.formats.openai_chat.front import OpenAIFront
from sidecar.providers.formats.openai_responses.items import reasoning_items
from sidecar.providers.formats.openai_responses.vocab import (
    FINISH_NAMES,
    FORMAT_NAME,
    REDACTED_ID,
    TOOL_ERROR_PREFIX,
    api_key_of,
    item_of,
    parts_of_item,
    read_data_url,
    refuse_stateful,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse

__all__ = ["REQUEST_KEYS", "RESPONSES_ROUTE", "ResponsesFront", "ResponsesWriter", "parse_request"]

RESPONSES_ROUTE = "/v1/responses"

REQUEST_KEYS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "safety_identifier",
        "user",
        "store",
        "include",
        "stream",
    }
)
"""The request keys the front reads (the module's table); any other one that is not null is refused."""
_EFFORTS = ("minimal", "low", "medium", "high")
_DETAILS = ("auto", "low", "high")
_CHAT = OpenAIFront()
"""What is the same as Chat Completions: the error body, its types, the key."""
_PARAMS: ParamNames = {
    "messages": "input",
    "system": "instructions",
    "system_cache": "instructions",
    "tools[].name": "tools[].name",
    "tools[].parameters_json": "tools[].parameters",
    "tools[].strict": "tools[].strict",
    "tools[].cache": "tools[]",
    "response_schema_json": "text.format.schema",
    "reasoning.budget_tokens": "reasoning.effort",
    "reasoning.effort": "reasoning.effort",
    "tool_choice.mode": "tool_choice",
    "tool_choice.name": "tool_choice.name",
    "end_user": ("safety_identifier", "user"),
}
"""The core's parameters by the names this front's callers send (``ParamNames``)."""


class ResponsesFront:
    """The OpenAI Responses format as a provider speaks it (the module's tables)."""

    path = RESPONSES_ROUTE
    words = "an OpenAI Responses"
    id_prefix = "resp_"
    params = _PARAMS

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(body)
        positive_budget(request, "max_output_tokens")
        return Ask(request, bool_field(body, "stream"))

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        out = response_object(reply, head, output_items(reply, head), "")
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> ResponsesWriter:
        return ResponsesWriter(head)

    def error_body(
        self,
        message: str,
        error_type: str,
        *,
        code: str | None = None,
        param: str | None = None,
        extension: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        return _CHAT.error_body(message, error_type, code=code, param=param, extension=extension)

    def answer(self, code: str, status: int) -> tuple[int, str]:
        return _CHAT.answer(code, status)

    def error_type(self, status: int) -> str:
        return _CHAT.error_type(status)

    def api_key(self, headers: Mapping[str, str]) -> str:
        return api_key_of(headers)


# ---------------------------------------------------------------------------- replies rendered


def _status(reply: ChatReply) -> tuple[str, dict[str, Any] | None]:
    reason = FINISH_NAMES.get(reply.finish)
    if reason is None or reply.refusal is not None:
        return "completed", None
    return "incomplete", {"reason": reason}


def usage_of(reply: ChatReply) -> dict[str, Any]:
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
    reply: ChatReply | None, head: ReplyHead, output: list[dict[str, Any]], status: str
) -> dict[str, Any]:
    """The Response object: ``reply`` None for the one a stream opens with (``status`` in_progress)."""
    incomplete = None
    if reply is not None:
        status, incomplete = _status(reply)
    return {
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


def _reasoning_item(item: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {**item, "status": status} if "encrypted_content" in item else {**item, "encrypted_content": None}


def output_items(reply: ChatReply, head: ReplyHead) -> list[dict[str, Any]]:
    """A reply's output items: its reasoning, its message, its calls."""
    out = [_reasoning_item(i) for i in reasoning_items(reply.reasoning)]
    content: list[dict[str, Any]] = []
    if reply.refusal is not None:
        content.append({"type": "refusal", "refusal": reply.refusal})
    elif reply.text:
        content.append({"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []})
    if content:
        out.append(_message(head, content, "completed"))
    out += [_call(head, c, i, "completed") for i, c in enumerate(reply.tool_calls)]
    return out


def _message(head: ReplyHead, content: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{head.reply_id}", "role": "assistant", "status": status,
            "content": content}  # fmt: skip


def _call(head: ReplyHead, c: ToolCall, index: int, status: str) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{head.reply_id}_{index}", "call_id": c.id, "name": c.name,
            "arguments": c.arguments_json or "{}", "status": status}  # fmt: skip


class ResponsesWriter:
    """One streamed reply as Responses events (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._seq = 0
        self._open: dict[str, Any] | None = None
        """The output item being streamed (its deltas so far in it)."""
        self._index = -1
        """Its output index."""
        self._calls = 0
        self._items = 0
        """Reasoning items begun."""
        self._first = 0
        """The core's index of the open reasoning item's first part."""
        self._done: list[dict[str, Any]] = []

    def _event(self, kind: str, **fields: Any) -> Sse:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return (kind, data)

    def _close(self) -> list[Sse]:
        item = self._open
        if item is None:
            return []
        self._open = None
        out: list[Sse] = []
        at = {"item_id": item["id"], "output_index": self._index}
        if item["type"] == "message":
            part = item["content"][0]
            if part["type"] == "output_text":
                out.append(self._event("response.output_text.done", **at, content_index=0, text=part["text"],
                                       logprobs=[]))  # fmt: skip
            else:
                out.append(self._event("response.refusal.done", **at, content_index=0, refusal=part["refusal"]))
            out.append(self._event("response.content_part.done", **at, content_index=0, part=part))
        elif item["type"] == "function_call":
            out.append(self._event("response.function_call_arguments.done", **at, arguments=item["arguments"],
                                   name=item["name"]))  # fmt: skip
        else:
            for k, s in enumerate(item["summary"]):
                out.append(self._event("response.reasoning_summary_text.done", **at, summary_index=k, text=s["text"]))
                out.append(self._event("response.reasoning_summary_part.done", **at, summary_index=k, part=s))
        item["status"] = "completed"
        if item["type"] == "reasoning":
            item.pop("_signed", None)
            item.setdefault("encrypted_content", None)
        self._done.append(item)
        out.append(self._event("response.output_item.done", output_index=self._index, item=item))
        return out

    def _begin(self, item: dict[str, Any]) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._open = item
        added = {**item, "status": "in_progress"} if item["type"] != "reasoning" else dict(item)
        if item["type"] == "message":
            added["content"] = []
        if item["type"] == "function_call":
            added["arguments"] = ""
        if item["type"] == "reasoning":
            added["summary"] = []
        out.append(self._event("response.output_item.added", output_index=self._index, item=added))
        return out

    def start(self, input_tokens: int = 0) -> list[Sse]:
        opened = response_object(None, self._head, [], "in_progress")
        return [
            self._event("response.created", response=opened),
            self._event("response.in_progress", response=opened),
        ]

    def _text(self, kind: str, text: str) -> list[Sse]:
        out: list[Sse] = []
        item = self._open
        if item is None or item["type"] != "message" or item["content"][0]["type"] != kind:
            part: dict[str, Any] = (
                {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                if kind == "output_text"
                else {"type": "refusal", "refusal": ""}
            )
            out += self._begin(_message(self._head, [part], "in_progress"))
            assert self._open is not None
            item = self._open
            added = {**part, "text": ""} if kind == "output_text" else part
            out.append(self._event("response.content_part.added", item_id=item["id"], output_index=self._index,
                                   content_index=0, part=dict(added)))  # fmt: skip
        part = item["content"][0]
        at = {"item_id": item["id"], "output_index": self._index, "content_index": 0}
        if kind == "output_text":
            part["text"] += text
            out.append(self._event("response.output_text.delta", **at, delta=text, logprobs=[]))
        else:
            part["refusal"] += text
            out.append(self._event("response.refusal.delta", **at, delta=text))
        return out

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, TextDelta):
            return self._text("output_text", delta.text) if delta.text else []
        if isinstance(delta, ReasoningDelta):
            return self._thought(delta)
        out: list[Sse] = []
        if delta.id or delta.name:
            call = ToolCall(delta.id, delta.name, "")
            out += self._begin(_call(self._head, call, self._calls, "in_progress"))
            self._calls += 1
            assert self._open is not None
            self._open["arguments"] = ""
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
        if item is None or item["type"] != "reasoning" or (item.get("_signed") and delta.index > self._first):
            item_id = f"rs_{self._head.reply_id}_{self._items}"
            self._items += 1
            out += self._begin({"type": "reasoning", "id": item_id, "summary": []})
            self._first = delta.index
            item = self._open
        assert item is not None
        at = {"item_id": item["id"], "output_index": self._index}
        if delta.text:
            k = max(delta.index - self._first, 0)
            while len(item["summary"]) <= k:
                item["summary"].append({"type": "summary_text", "text": ""})
                out.append(self._event("response.reasoning_summary_part.added", **at,
                                       summary_index=len(item["summary"]) - 1,
                                       part={"type": "summary_text", "text": ""}))  # fmt: skip
            item["summary"][k]["text"] += delta.text
            out.append(self._event("response.reasoning_summary_text.delta", **at, summary_index=k, delta=delta.text))
        if delta.redacted_data:
            item["id"], item["encrypted_content"] = f"{REDACTED_ID}{self._items - 1}", delta.redacted_data
            item["_signed"] = True
        elif delta.signature:
            item["id"], item["encrypted_content"] = item_of(delta.signature, self._items - 1)
            item["_signed"] = True
        return out

    def refusal(self, text: str) -> list[Sse]:
        return self._text("refusal", text)

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._open, self._index, self._calls, self._items, self._done = None, -1, 0, 0, []
        return [self._event("sidecar.restart", restart=dict(words))]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        out = self._close()
        response = response_object(reply, self._head, self._done, "")
        if extension is not None:
            response["sidecar"] = dict(extension)
        status = response["status"]
        out.append(self._event(f"response.{status}", response=response))
        return out

    def error(self, body: dict[str, Any]) -> list[Sse]:
        error = body.get("error")
        error = error if isinstance(error, dict) else {}
        fields = {"code": error.get("code"), "message": str(error.get("message") or ""), "param": error.get("param")}
        if "sidecar" in error:
            fields["sidecar"] = error["sidecar"]
        return [self._event("error", **fields)]


# ---------------------------------------------------------------------------- requests read


def _carried_only(obj: Mapping[str, Any], keys: frozenset[str], where: str) -> None:
    """INVALID_INPUT naming the first key of ``obj`` not in ``keys`` whose value is not null."""
    for key, value in obj.items():
        if key not in keys and value is not None:
            raise InvalidInput(
                f"{where}.{key}" if where else key,
                shown(value),
                "the sidecar does not carry this key: leave it out (docs/carried.md)",
            )


def _string(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key}" if where else key, shown(value), "must be a string")
    return value


class _Reader:
    """The input items, in order, as the core's messages (the module's table)."""

    def __init__(self) -> None:
        self.system: list[str] = []
        self.messages: list[Message] = []
        self._reasoning: list[ReasoningPart] = []
        self._calls: list[ToolCall] = []
        self._assistant: Message | None = None
        self._results: list[ToolCallResult] = []
        self._names: dict[str, str] = {}

    def _flush_assistant(self) -> None:
        if self._assistant is None and not self._calls and not self._reasoning:
            return
        m = self._assistant or Message(Role.ASSISTANT)
        calls, thoughts = tuple(self._calls), tuple(self._reasoning)
        self.messages.append(
            Message(Role.ASSISTANT, m.text, calls, parts=m.parts, reasoning=thoughts, carried=m.carried)
        )
        self._assistant, self._calls, self._reasoning = None, [], []

    def _flush_results(self) -> None:
        if self._results:
            self.messages.append(Message(Role.TOOL, tool_results=tuple(self._results)))
            self._results = []

    def read(self, item: dict[str, Any], where: str) -> None:
        kind = item.get("type")
        if kind is None or kind == "message":
            self._message(item, where)
        elif kind == "function_call":
            self._flush_results()
            carried = kept(
                FORMAT_NAME, item, frozenset({"type", "id", "call_id", "name", "arguments", "status"}), where
            )
            call_id, name = _string(item, "call_id", where), _string(item, "name", where)
            call = ToolCall(call_id, name, _arguments(item, where), carried)
            self._names[call.id] = call.name
            self._calls.append(call)
        elif kind == "function_call_output":
            self._flush_assistant()
            carried = kept(FORMAT_NAME, item, frozenset({"type", "id", "call_id", "output", "status"}), where)
            call_id = _string(item, "call_id", where)
            read = _result(item.get("output"), call_id, self._names.get(call_id, ""), where)
            self._results.append(replace(read, carried=carried))
        elif kind == "reasoning":
            self._flush_results()
            if self._assistant is not None or self._calls:
                self._flush_assistant()
            self._reasoning += _reasoning(item, where)
        else:
            rule = "must be a message, function_call, function_call_output or reasoning item (docs/carried.md)"
            raise InvalidInput(f"{where}.type", shown(kind), rule)

    def _message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        content = item.get("content")
        if role in ("system", "developer"):
            _carried_only(item, frozenset({"type", "role", "content"}), where)
            self.system.append(_joined(content, f"{where}.content"))
            return
        if role == "user":
            carried = kept(FORMAT_NAME, item, frozenset({"type", "role", "content"}), where)
            self._flush_assistant()
            self._flush_results()
            read = _user_content(content, f"{where}.content")
            text, parts = (read, ()) if isinstance(read, str) else ("", read)
            self.messages.append(Message(Role.USER, text, parts=parts, carried=carried))
            return
        if role == "assistant":
            carried = kept(FORMAT_NAME, item, frozenset({"type", "role", "content", "id", "status", "phase"}), where)
            self._flush_results()
            if self._assistant is not None or self._calls:
                self._flush_assistant()
            read = _assistant_content(content, f"{where}.content")
            text, parts = (read, ()) if isinstance(read, str) else ("", read)
            self._assistant = Message(Role.ASSISTANT, text, parts=parts, carried=carried)
            return
        raise InvalidInput(f"{where}.role", shown(role), "must be system, developer, user or assistant")

    def end(self) -> tuple[Message, ...]:
        self._flush_assistant()
        self._flush_results()
        return tuple(self.messages)


def _arguments(item: Mapping[str, Any], where: str) -> str:
    arguments = item.get("arguments")
    if arguments is None:
        return "{}"
    if not isinstance(arguments, str):
        raise InvalidInput(f"{where}.arguments", shown(arguments), "must be the arguments as JSON text")
    return arguments


def _reasoning(item: dict[str, Any], where: str) -> list[ReasoningPart]:
    _carried_only(item, frozenset({"type", "id", "summary", "encrypted_content", "status", "content"}), where)
    if item.get("content"):
        raise InvalidInput(
            f"{where}.content", "reasoning_text", "the sidecar carries a reasoning summary, not its text"
        )
    item_id = _string(item, "id", where)
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise InvalidInput(f"{where}.encrypted_content", shown(encrypted), "must be a string")
    summary = [] if item.get("summary") is None else item["summary"]
    if not isinstance(summary, list):
        raise InvalidInput(f"{where}.summary", shown(summary), "must be a list of summary_text parts")
    texts = []
    for k, s in enumerate(summary):
        at = f"{where}.summary[{k}]"
        if not isinstance(s, dict) or s.get("type") != "summary_text":
            raise InvalidInput(at, shown(s), 'must be {"type": "summary_text", "text"}')
        _carried_only(s, frozenset({"type", "text"}), at)
        texts.append(_string(s, "text", at))
    return parts_of_item(item_id, encrypted or "", texts)


def _joined(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    parts = _parts(content, where, ("input_text",))
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def _user_content(content: Any, where: str) -> str | tuple[Part, ...]:
    if isinstance(content, str):
        return content
    return _parts(content, where, ("input_text", "input_image", "input_file"))


def _assistant_content(content: Any, where: str) -> str | tuple[Part, ...]:
    if isinstance(content, str):
        return content
    parts = _parts(content, where, ("output_text", "input_text", "refusal"))
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return parts


def _parts(content: Any, where: str, kinds: tuple[str, ...]) -> tuple[Part, ...]:
    if not isinstance(content, list):
        raise InvalidInput(where, shown(content), "must be a string or a list of content parts")
    out: list[Part] = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict) or kind not in kinds:
            raise InvalidInput(
                at, shown(kind if isinstance(part, dict) else part), f"must be a {' / '.join(kinds)} part"
            )
        out.append(_part(part, kind, at))
    return tuple(out)


def _part(part: dict[str, Any], kind: str, at: str) -> Part:
    if kind in ("input_text", "output_text"):
        carried = kept(FORMAT_NAME, part, frozenset({"type", "text", "annotations", "logprobs"}), at)
        return TextPart(_string(part, "text", at), carried=carried)
    if kind == "refusal":
        carried = kept(FORMAT_NAME, part, frozenset({"type", "refusal"}), at)
        return TextPart(_string(part, "refusal", at), carried=carried)  # what the model said when it refused
    if kind == "input_image":
        return _image(part, at)
    return _file(part, at)


def _image(part: dict[str, Any], at: str) -> ImagePart:
    carried = kept(FORMAT_NAME, part, frozenset({"type", "image_url", "detail", "file_id"}), at)
    if part.get("file_id") is not None:
        raise InvalidInput(f"{at}.file_id", shown(part["file_id"]), "names a file uploaded to OpenAI: send image_url")
    url = _string(part, "image_url", at)
    detail = text_field(part, "detail", f"{at}.detail") or "auto"
    if detail not in _DETAILS:
        raise InvalidInput(f"{at}.detail", shown(detail), "must be auto, low or high")
    detail = "" if detail == "auto" else detail
    if not url.startswith("data:"):
        return ImagePart(url=url, detail=detail, carried=carried)
    read = read_data_url(url)
    if read is None:
        raise InvalidInput(f"{at}.image_url", url[:60], "a data: URL is data:<media type>;base64,<the bytes>")
    return ImagePart(read[0], read[1], detail=detail, carried=carried)


def _file(part: dict[str, Any], at: str) -> DocumentPart:
    carried = kept(FORMAT_NAME, part, frozenset({"type", "file_data", "file_url", "filename", "file_id"}), at)
    if part.get("file_id") is not None:
        raise InvalidInput(
            f"{at}.file_id", shown(part["file_id"]), "names a file uploaded to OpenAI: send file_data or file_url"
        )
    if part.get("file_url") is not None:
        return DocumentPart(url=_string(part, "file_url", at), carried=carried)
    data = part.get("file_data")
    read = read_data_url(data) if isinstance(data, str) else None
    if read is None:
        raise InvalidInput(f"{at}.file_data", shown(data)[:60], "must be a data: URL (data:application/pdf;base64,...)")
    filename = part.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise InvalidInput(f"{at}.filename", shown(filename), "must be the file's name (a string)")
    media_type, raw = read
    if media_type == "text/plain":
        try:
            return DocumentPart(media_type, text=raw.decode("utf-8"), title=filename or "", carried=carried)
        except UnicodeDecodeError:
            raise InvalidInput(f"{at}.file_data", "text/plain", "a text/plain file must be UTF-8") from None
    return DocumentPart(media_type, raw, title=filename or "", carried=carried)


def _result(output: Any, call_id: str, name: str, where: str) -> ToolCallResult:
    if output is None or isinstance(output, str):
        text = output or ""
        error = text.startswith(TOOL_ERROR_PREFIX)
        return ToolCallResult(call_id, text.removeprefix(TOOL_ERROR_PREFIX), error, name)
    parts = list(_parts(output, f"{where}.output", ("input_text", "input_image")))
    first = parts[0] if parts else None
    error = isinstance(first, TextPart) and first.text.startswith(TOOL_ERROR_PREFIX)
    if error and isinstance(first, TextPart):
        rest = first.text.removeprefix(TOOL_ERROR_PREFIX)
        parts[0:1] = [TextPart(rest)] if rest else []
    return ToolCallResult(call_id, "", error, name, tuple(parts))


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """A Responses request as the core's ModelRequest (the module's table)."""
    refuse_stateful(body)
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, REQUEST_KEYS)
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    reader = _Reader()
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidInput("instructions", shown(instructions), "must be a string")
    raw = body.get("input")
    if isinstance(raw, str):
        reader.messages.append(Message(Role.USER, raw))
    elif isinstance(raw, list) and all(isinstance(i, dict) for i in raw):
        for i, item in enumerate(raw):
            reader.read(item, f"input[{i}]")
    else:
        raise InvalidInput("input", shown(raw), "must be a string or a list of input items")
    messages = reader.end()
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(_list(body, "tools")))
    system = "\n\n".join(([instructions] if instructions else []) + reader.system)
    return ModelRequest(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        response_schema_json=_response_schema(body.get("text"), unknown),
        max_output_tokens=number_field(body, "max_output_tokens", int),
        temperature=number_field(body, "temperature", float),
        controls=_controls(body, bool(tools), unknown),
        carried=unknown.carried(""),
    )


def _list(body: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InvalidInput(key, shown(value), "must be a list of JSON objects")
    return value


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    if t.get("type") != "function":
        rule = "must be a function tool (the sidecar carries no built-in tools)"
        raise InvalidInput(f"{where}.type", shown(t.get("type")), rule)
    carried = kept(FORMAT_NAME, t, frozenset({"type", "name", "description", "parameters", "strict"}), where)
    strict = optional_bool(t, "strict", f"{where}.strict")
    name = _string(t, "name", where)
    description = text_field(t, "description", f"{where}.description")
    parameters = t.get("parameters")
    params = "" if parameters is None else schema_text(parameters, f"{where}.parameters")
    return ToolDefinition(name, description, params, strict=strict, carried=carried)


def _response_schema(text: Any, unknown: Unknown) -> str:
    if text is None:
        return ""
    if not isinstance(text, dict):
        raise InvalidInput("text", shown(text), "must be an object")
    unknown.take(text, frozenset({"format"}), "text")
    fmt = text.get("format")
    if fmt is None:
        return ""
    if not isinstance(fmt, dict):
        raise InvalidInput("text.format", shown(fmt), "must be an object")
    kind = fmt.get("type")
    if kind == "json_schema":
        unknown.take(fmt, frozenset({"type", "name", "schema", "strict", "description"}), "text", "format")
        optional_bool(fmt, "strict", "text.format.strict")  # either way the sidecar holds the reply to the schema
        for key in ("name", "description"):  # not sent on (the schema is what the sidecar holds to): but text
            text_field(fmt, key, f"text.format.{key}")
        return schema_text(fmt.get("schema"), "text.format.schema")
    if kind in ("json_object", "text"):  # nothing is rendered for them to carry a key into: refused, not dropped
        _carried_only(fmt, frozenset({"type"}), "text.format")
        return compact_json({"type": "object"}) if kind == "json_object" else ""
    raise InvalidInput("text.format.type", shown(kind), "must be text, json_object or json_schema")


def _controls(body: Mapping[str, Any], tools: bool, unknown: Unknown) -> Controls:
    reasoning = body.get("reasoning")
    effort = None
    if reasoning is not None:
        if not isinstance(reasoning, dict):
            raise InvalidInput("reasoning", shown(reasoning), "must be an object")
        unknown.take(reasoning, frozenset({"effort", "summary"}), "reasoning")
        text_field(reasoning, "summary", "reasoning.summary")  # implied by the effort (module docstring): but text
        effort = reasoning.get("effort")
        if effort is not None and effort not in _EFFORTS:
            raise InvalidInput("reasoning.effort", shown(effort), f"must be one of {', '.join(_EFFORTS)}")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidInput("parallel_tool_calls", shown(parallel), "must be true or false")
    choice = _tool_choice(body.get("tool_choice"), unknown)
    for key, value in (("tool_choice", choice), ("parallel_tool_calls", parallel)):
        if value is not None and not tools:
            raise InvalidInput(key, shown(body[key]), f"{key} is only allowed when tools are given")
    user = body.get("safety_identifier")
    if user is None:
        user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidInput("safety_identifier", shown(user), "must be the end user's id (a string)")
    return Controls(
        reasoning=None if effort is None else Reasoning(effort=effort),
        tool_choice=choice,
        parallel_tool_calls=parallel,
        top_p=number_field(body, "top_p", float),
        end_user=user or "",
    )


def _tool_choice(value: Any, unknown: Unknown) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return ToolChoice(value)
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        unknown.take(value, frozenset({"type", "name"}), "tool_choice")
        return ToolChoice("tool", value["name"])
    rule = 'must be "auto", "none", "required" or {"type": "function", "name": a tool\'s name}'
    raise InvalidInput("tool_choice", shown(value), rule)
