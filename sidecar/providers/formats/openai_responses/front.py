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

``render`` and ``writer`` answer in the format (``writer.py``); a failure is Chat Completions' error body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, cast

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
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.carried import Unknown, kept, refuse_unknown
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.inline import read_data_url
from sidecar.providers.formats.openai_chat.front import OpenAIFront
from sidecar.providers.formats.openai_chat.vocab import TOOL_ERROR_PREFIX, api_key_of
from sidecar.providers.formats.openai_responses import shapes
from sidecar.providers.formats.openai_responses.vocab import FORMAT_NAME, parts_of_item, refuse_stateful
from sidecar.providers.formats.openai_responses.writer import ResponsesWriter, output_items, response_object
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead
from sidecar.providers.formats.shapes import declared

__all__ = ["REQUEST_KEYS", "RESPONSES_ROUTE", "ResponsesFront", "parse_request"]

RESPONSES_ROUTE = "/v1/responses"
REQUEST_KEYS = declared(shapes.Request)
"""The request keys the front reads; any other one is carried (``carried.Unknown``)."""
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

    def read(self, item: Mapping[str, Any], where: str) -> None:
        kind = item.get("type")
        _READERS[item["role"] if kind in (None, "message") else kind](self, item, where)

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
        refuse_unknown(item, declared(shapes.SystemMessage), where, here=True)  # no element of the core holds its keys
        content = item["content"]
        for j, part in enumerate(content if isinstance(content, list) else ()):
            refuse_unknown(part, declared(shapes.InputText), f"{where}.content[{j}]", here=True)
        self.system.append(content if isinstance(content, str) else "".join(p["text"] for p in content))

    def _user(self, item: shapes.UserMessage, where: str) -> None:
        self._flush_assistant()
        self._flush_results()
        text, parts = _content(item["content"], f"{where}.content")
        self.messages.append(
            Message(Role.USER, text, parts=parts, carried=kept(FORMAT_NAME, item, declared(shapes.UserMessage), where))
        )

    def _assistant_message(self, item: shapes.AssistantMessage, where: str) -> None:
        self._next_turn()
        text, parts = _content(item["content"], f"{where}.content")
        if len(parts) == 1 and isinstance(parts[0], TextPart) and parts[0].carried is None:
            text, parts = parts[0].text, ()
        carried = kept(FORMAT_NAME, item, declared(shapes.AssistantMessage), where)
        self._assistant = Message(Role.ASSISTANT, text, parts=parts, carried=carried)

    def _call(self, item: shapes.FunctionCall, where: str) -> None:
        self._flush_results()
        arguments = item.get("arguments")
        carried = kept(FORMAT_NAME, item, declared(shapes.FunctionCall), where)
        call = ToolCall(item["call_id"], item["name"], "{}" if arguments is None else arguments, carried)
        self._names[call.id] = call.name
        self._calls.append(call)

    def _output(self, item: shapes.FunctionCallOutput, where: str) -> None:
        self._flush_assistant()
        call_id = item["call_id"]
        read = _result(item.get("output"), call_id, self._names.get(call_id, ""), f"{where}.output")
        self._results.append(replace(read, carried=kept(FORMAT_NAME, item, declared(shapes.FunctionCallOutput), where)))

    def _thought(self, item: shapes.ReasoningItem, where: str) -> None:
        self._next_turn()
        refuse_unknown(item, declared(shapes.ReasoningItem), where, here=True)
        if item.get("content"):  # a list the type allows, but nothing in the core holds
            rule = "the sidecar carries a reasoning summary, not its text"
            raise InvalidInput(f"{where}.content", "reasoning_text", rule, as_sent=True)
        summary = item.get("summary") or []
        for k, s in enumerate(summary):
            refuse_unknown(s, declared(shapes.SummaryText), f"{where}.summary[{k}]", here=True)
        texts = [s["text"] for s in summary]
        self._reasoning += parts_of_item(item["id"], item.get("encrypted_content") or "", texts)


_READERS: Mapping[str, Callable[[_Reader, Any, str], None]] = {
    "system": _Reader._system,
    "developer": _Reader._system,
    "user": _Reader._user,
    "assistant": _Reader._assistant_message,
    "function_call": _Reader._call,
    "function_call_output": _Reader._output,
    "reasoning": _Reader._thought,
}
"""Each input item's reader by its type (a message's by its role)."""


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
    carried = kept(FORMAT_NAME, part, declared(_TEXTS[kind]), at)  # a refusal: what the model said when it refused
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
    carried = kept(FORMAT_NAME, part, declared(shapes.InputImage), at)
    if not url.startswith("data:"):
        return ImagePart(url=url, detail=detail, carried=carried)
    read = read_data_url(url)
    if read is None:
        raise InvalidInput(f"{at}.image_url", url[:60], "a data: URL is data:<media type>;base64,<the bytes>")
    return ImagePart(read[0], read[1], detail=detail, carried=carried)


def _file(part: shapes.InputFile, at: str) -> DocumentPart:
    _no_file_id(part, at, "file_data or file_url")
    carried = kept(FORMAT_NAME, part, declared(shapes.InputFile), at)
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
        carried=kept(FORMAT_NAME, tool, declared(shapes.FunctionTool), where),
    )


def _response_schema(text: shapes.TextConfig | None, unknown: Unknown) -> str:
    fmt = None if text is None else text.get("format")
    if text is not None:
        unknown.take(text, declared(shapes.TextConfig), "text")
    if fmt is None:
        return ""
    if fmt["type"] == "json_schema":  # strict or not, the sidecar holds every reply to the schema
        unknown.take(fmt, declared(shapes.JsonSchemaFormat), "text", "format")
        return compact_json(fmt["schema"])
    refuse_unknown(fmt, ("type",), "text.format", here=True)  # nothing is rendered for them to carry a key into
    return compact_json({"type": "object"}) if fmt["type"] == "json_object" else ""


def _controls(request: shapes.Request, tools: bool, unknown: Unknown) -> Controls:
    reasoning = request.get("reasoning")
    if reasoning is not None:
        unknown.take(reasoning, declared(shapes.ReasoningConfig), "reasoning")
    effort = None if reasoning is None else reasoning.get("effort")
    choice, parallel = request.get("tool_choice"), request.get("parallel_tool_calls")
    for key, value in (("tool_choice", choice), ("parallel_tool_calls", parallel)):
        if value is not None and not tools:  # a rule across two keys
            raise InvalidInput(key, shown(value), f"{key} is only allowed when tools are given")
    if isinstance(choice, dict):
        unknown.take(choice, declared(shapes.ToolChoiceFunction), "tool_choice")
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
