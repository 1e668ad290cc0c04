"""The OpenAI Responses front (``POST /v1/responses``): a request read, the answer rendered (whole, streamed, failed).

A request is checked against ``shapes.Request`` first (a wrong value: INVALID_INPUT naming the caller's
path), then read knowing its types hold. The sidecar is stateless: it keeps no response to continue
from, so a request that asks it to (``previous_response_id``, ``conversation``, ``store: true``,
``background: true``) is refused naming the key; the caller sends the whole conversation, as the
upstream half does. ``ResponsesFront.parse`` is the inverse of ``upstream.ResponsesUpstream.body``::

    request                        the core's
    input: a string                one user message
    input: items, in order
      message                        system / developer -> the system prompt, after ``instructions``; user
                                     -> text or parts; assistant -> text or parts (a refusal part's words
                                     as its text)
      function_call                  a tool call of the assistant turn it follows (no arguments: "{}")
      function_call_output           a tool result (TOOL_ERROR_PREFIX marks an error)
      reasoning                      reasoning of the next assistant turn (``vocab``'s table, byte-identical)
    input_image, input_file        an image; a PDF or a UTF-8 text document (a data: URL or a URL, never a
                                   file_id: the sidecar cannot read a file uploaded to OpenAI)
    tools                          ToolDefinition (strict carried: docs/carried.md tools.strict)
    tool_choice,                   the same controls, only when tools are given
      parallel_tool_calls
    text.format                    json_schema -> its schema (strict or not, every reply is validated and
                                   corrected: docs/carried.md); json_object -> {"type": "object"}; text: none
    reasoning                      its effort (the summary is implied)
    safety_identifier, user        end_user
    store, include                 false, and the encrypted content only (the upstream sends both always)
    any other key                  carried to a deployment of this format (docs/carried.md): on the body,
                                   a user or assistant message, a part, a tool, a call, a result, text,
                                   reasoning, tool_choice; refused where nothing can carry it (a system
                                   message, a reasoning item, a text.format other than json_schema)

``render``, ``writer`` and ``error_body`` answer in the format (``shapes``' reply types)::

    ChatReply                      a Response: the reasoning items, a message (output_text | refusal), the
                                   function_call items; completed, or incomplete with its reason
    a stream                       response.created, response.in_progress; each item's output_item.added,
                                   its deltas (output_text, refusal, function_call_arguments,
                                   reasoning_summary_text), their *.done events and output_item.done; then
                                   response.completed (or .incomplete), the whole Response; each event
                                   numbered (``sequence_number``)
      the sidecar's restart        an event ``sidecar.restart`` (clients skip event types they do not know)
    a failure                      Chat Completions' error body; in a stream, an ``error`` event
                                   {"type": "error", "code", "message", "param"}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from typing import Any, Literal, cast

from typing_extensions import Unpack

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
from sidecar.providers.formats.carried import Unknown, kept, refuse_unknown
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.openai_chat.front import OpenAIFront
from sidecar.providers.formats.openai_responses import shapes
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
from sidecar.providers.formats.shapes import declared

__all__ = ["REQUEST_KEYS", "RESPONSES_ROUTE", "ResponsesFront", "ResponsesWriter", "parse_request"]

RESPONSES_ROUTE = "/v1/responses"
REQUEST_KEYS = declared(shapes.Request)
"""The request keys the front reads; any other one is carried (``carried.Unknown``)."""
_keys = cache(declared)
"""The keys an element's shape declares: the others are carried (or refused where nothing holds them)."""
_TEXTS = {"input_text": shapes.InputText, "output_text": shapes.OutputText, "refusal": shapes.Refusal}
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
        return Ask(parse_request(body), body.get("stream") is True)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return cast(dict[str, Any], response_object(reply, head, output_items(reply, head), "", extension))

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
        fields: shapes.Event = {"code": error.get("code"), "message": str(error.get("message") or ""),
                         "param": error.get("param")}  # fmt: skip
        if "sidecar" in error:
            fields["sidecar"] = error["sidecar"]
        return [self._event("error", **fields)]


# ---------------------------------------------------------------------------- requests read


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """A Responses request as the core's ModelRequest (the module's table)."""
    refuse_stateful(body)
    shapes.REQUEST.check(body)
    request = cast(shapes.Request, body)
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, REQUEST_KEYS)
    reader = _Reader()
    items = request["input"]
    if isinstance(items, str):
        reader.messages.append(Message(Role.USER, items))
    else:
        for i, item in enumerate(items):
            reader.read(item, f"input[{i}]")
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(request.get("tools") or ()))
    instructions = request.get("instructions")
    temperature = request.get("temperature")
    return ModelRequest(
        model=request["model"],
        messages=reader.end(),
        system="\n\n".join(([instructions] if instructions else []) + reader.system),
        tools=tools,
        response_schema_json=_response_schema(request.get("text"), unknown),
        max_output_tokens=request.get("max_output_tokens"),
        temperature=None if temperature is None else float(temperature),
        controls=_controls(request, bool(tools), unknown),
        carried=unknown.carried(""),
    )


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
        self._readers: Mapping[str, Callable[[Any, str], None]] = {
            "system": self._system,
            "developer": self._system,
            "user": self._user,
            "assistant": self._assistant_message,
            "function_call": self._call,
            "function_call_output": self._output,
            "reasoning": self._thought,
        }
        """Each item's reader by its type (a message's by its role)."""

    def read(self, item: Mapping[str, Any], where: str) -> None:
        kind = item.get("type")
        self._readers[item["role"] if kind in (None, "message") else kind](item, where)

    def end(self) -> tuple[Message, ...]:
        self._flush_assistant()
        self._flush_results()
        return tuple(self.messages)

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

    def _next_turn(self) -> None:
        """What an assistant's message or reasoning follows: a turn of its own after any other."""
        self._flush_results()
        if self._assistant is not None or self._calls:
            self._flush_assistant()

    def _system(self, item: shapes.SystemMessage, where: str) -> None:
        refuse_unknown(item, _keys(shapes.SystemMessage), where, here=True)  # no element of the core holds its keys
        content = item["content"]
        for j, part in enumerate(content if isinstance(content, list) else ()):
            refuse_unknown(part, _keys(shapes.InputText), f"{where}.content[{j}]", here=True)
        self.system.append(content if isinstance(content, str) else "".join(p["text"] for p in content))

    def _user(self, item: shapes.UserMessage, where: str) -> None:
        self._flush_assistant()
        self._flush_results()
        text, parts = _content(item["content"], f"{where}.content")
        self.messages.append(
            Message(Role.USER, text, parts=parts, carried=kept(FORMAT_NAME, item, _keys(shapes.UserMessage), where))
        )

    def _assistant_message(self, item: shapes.AssistantMessage, where: str) -> None:
        self._next_turn()
        text, parts = _content(item["content"], f"{where}.content")
        if len(parts) == 1 and isinstance(parts[0], TextPart) and parts[0].carried is None:
            text, parts = parts[0].text, ()
        carried = kept(FORMAT_NAME, item, _keys(shapes.AssistantMessage), where)
        self._assistant = Message(Role.ASSISTANT, text, parts=parts, carried=carried)

    def _call(self, item: shapes.FunctionCall, where: str) -> None:
        self._flush_results()
        arguments = item.get("arguments")
        carried = kept(FORMAT_NAME, item, _keys(shapes.FunctionCall), where)
        call = ToolCall(item["call_id"], item["name"], "{}" if arguments is None else arguments, carried)
        self._names[call.id] = call.name
        self._calls.append(call)

    def _output(self, item: shapes.FunctionCallOutput, where: str) -> None:
        self._flush_assistant()
        call_id = item["call_id"]
        read = _result(item.get("output"), call_id, self._names.get(call_id, ""), f"{where}.output")
        self._results.append(replace(read, carried=kept(FORMAT_NAME, item, _keys(shapes.FunctionCallOutput), where)))

    def _thought(self, item: shapes.ReasoningItem, where: str) -> None:
        self._next_turn()
        refuse_unknown(item, _keys(shapes.ReasoningItem), where, here=True)
        if item.get("content"):  # a list the type allows, but nothing in the core holds
            rule = "the sidecar carries a reasoning summary, not its text"
            raise InvalidInput(f"{where}.content", "reasoning_text", rule, as_sent=True)
        summary = item.get("summary") or []
        for k, s in enumerate(summary):
            refuse_unknown(s, _keys(shapes.SummaryText), f"{where}.summary[{k}]", here=True)
        texts = [s["text"] for s in summary]
        self._reasoning += parts_of_item(item["id"], item.get("encrypted_content") or "", texts)


def _content(content: str | list[Any], where: str) -> tuple[str, tuple[Part, ...]]:
    if isinstance(content, str):
        return content, ()
    return "", tuple(_part(part, f"{where}[{j}]") for j, part in enumerate(content))


def _part(part: Mapping[str, Any], at: str) -> Part:
    kind = part["type"]
    if kind == "input_image":
        return _image(cast(shapes.InputImage, part), at)
    if kind == "input_file":
        return _file(cast(shapes.InputFile, part), at)
    carried = kept(FORMAT_NAME, part, _keys(_TEXTS[kind]), at)  # a refusal: what the model said when it refused
    return TextPart(part["refusal"] if kind == "refusal" else part["text"], carried=carried)


def _no_file_id(part: shapes.InputImage | shapes.InputFile, at: str, instead: str) -> None:
    if part.get("file_id") is not None:
        rule = f"names a file uploaded to OpenAI, which the sidecar cannot read: send {instead}"
        raise InvalidInput(f"{at}.file_id", shown(part.get("file_id")), rule, as_sent=True)


def _image(part: shapes.InputImage, at: str) -> ImagePart:
    _no_file_id(part, at, "image_url")
    url = part.get("image_url")
    if url is None:  # optional in the type, for a file_id: the sidecar needs the image itself
        raise InvalidInput(f"{at}.image_url", "", "is required", as_sent=True)
    detail: str = part.get("detail") or "auto"
    detail = "" if detail == "auto" else detail
    carried = kept(FORMAT_NAME, part, _keys(shapes.InputImage), at)
    if not url.startswith("data:"):
        return ImagePart(url=url, detail=detail, carried=carried)
    read = read_data_url(url)
    if read is None:
        raise InvalidInput(f"{at}.image_url", url[:60], "a data: URL is data:<media type>;base64,<the bytes>")
    return ImagePart(read[0], read[1], detail=detail, carried=carried)


def _file(part: shapes.InputFile, at: str) -> DocumentPart:
    _no_file_id(part, at, "file_data or file_url")
    carried = kept(FORMAT_NAME, part, _keys(shapes.InputFile), at)
    url = part.get("file_url")
    if url is not None:
        return DocumentPart(url=url, carried=carried)
    data = part.get("file_data")
    read = None if data is None else read_data_url(data)
    if read is None:
        raise InvalidInput(f"{at}.file_data", shown(data)[:60], "must be a data: URL (data:application/pdf;base64,...)")
    media_type, raw = read
    title = part.get("filename") or ""
    if media_type != "text/plain":
        return DocumentPart(media_type, raw, title=title, carried=carried)
    try:
        return DocumentPart(media_type, text=raw.decode("utf-8"), title=title, carried=carried)
    except UnicodeDecodeError:
        raise InvalidInput(f"{at}.file_data", "text/plain", "a text/plain file must be UTF-8") from None


def _result(output: str | list[Any] | None, call_id: str, name: str, where: str) -> ToolCallResult:
    if output is None or isinstance(output, str):
        text = output or ""
        return ToolCallResult(call_id, text.removeprefix(TOOL_ERROR_PREFIX), text.startswith(TOOL_ERROR_PREFIX), name)
    parts = [_part(part, f"{where}[{j}]") for j, part in enumerate(output)]
    first = parts[0] if parts else None
    error = isinstance(first, TextPart) and first.text.startswith(TOOL_ERROR_PREFIX)
    if error and isinstance(first, TextPart):
        rest = first.text.removeprefix(TOOL_ERROR_PREFIX)
        parts[0:1] = [TextPart(rest)] if rest else []
    return ToolCallResult(call_id, "", error, name, tuple(parts))


def _tool(tool: shapes.FunctionTool, where: str) -> ToolDefinition:
    parameters = tool.get("parameters")
    return ToolDefinition(
        tool["name"],
        tool.get("description") or "",
        "" if parameters is None else compact_json(parameters),
        strict=tool.get("strict"),
        carried=kept(FORMAT_NAME, tool, _keys(shapes.FunctionTool), where),
    )


def _response_schema(text: shapes.TextConfig | None, unknown: Unknown) -> str:
    fmt = None if text is None else text.get("format")
    if text is not None:
        unknown.take(text, _keys(shapes.TextConfig), "text")
    if fmt is None:
        return ""
    if fmt["type"] == "json_schema":  # strict or not, the sidecar holds every reply to the schema
        unknown.take(fmt, _keys(shapes.JsonSchemaFormat), "text", "format")
        return compact_json(fmt["schema"])
    refuse_unknown(fmt, ("type",), "text.format", here=True)  # nothing is rendered for them to carry a key into
    return compact_json({"type": "object"}) if fmt["type"] == "json_object" else ""


def _controls(request: shapes.Request, tools: bool, unknown: Unknown) -> Controls:
    reasoning = request.get("reasoning")
    if reasoning is not None:
        unknown.take(reasoning, _keys(shapes.ReasoningConfig), "reasoning")
    effort = None if reasoning is None else reasoning.get("effort")
    choice, parallel = request.get("tool_choice"), request.get("parallel_tool_calls")
    for key, value in (("tool_choice", choice), ("parallel_tool_calls", parallel)):
        if value is not None and not tools:  # a rule across two keys
            raise InvalidInput(key, shown(value), f"{key} is only allowed when tools are given")
    if isinstance(choice, dict):
        unknown.take(choice, _keys(shapes.ToolChoiceFunction), "tool_choice")
    user = request.get("safety_identifier")
    top_p = request.get("top_p")
    return Controls(
        reasoning=None if effort is None else Reasoning(effort=effort),
        tool_choice=None
        if choice is None
        else ToolChoice("tool", choice["name"])
        if isinstance(choice, dict)
        else ToolChoice(choice),
        parallel_tool_calls=parallel,
        top_p=None if top_p is None else float(top_p),
        end_user=(request.get("user") if user is None else user) or "",
    )
