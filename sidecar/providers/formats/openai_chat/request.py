"""An OpenAI Chat Completions request read into the core's (``parse_request``, the front's ``parse``).

``OpenAIFront.parse`` checks the body against ``shapes.Request`` once (a wrong value: INVALID_INPUT naming
the caller's path), then reads it into the core's request (the inverse of ``upstream.OpenAIUpstream.body``)::

    request                                     core
    messages  system, developer                 system (text parts joined; the prompts by a blank line)
              user, assistant                   Message(USER | ASSISTANT); an assistant's refusal: its text
              tool (TOOL_ERROR_PREFIX: error)   the turn's tool results, in one Message(TOOL)
      content parts text, image_url, file       TextPart; ImagePart (a data: URL as its bytes); DocumentPart
                                                (file_data's bytes, text/plain as its text; filename: title)
    tools[].function                            ToolDefinition (strict: docs/carried.md tools.strict)
    response_format json_schema | json_object   response_schema_json | {"type": "object"}; text: none
    max_tokens, else max_completion_tokens      max_output_tokens (at least 1)
    reasoning_effort; user                      Controls.reasoning; Controls.end_user
    tool_choice, parallel_tool_calls, stop,     the Controls of those names (stop: a list)
      top_p, seed, the two penalties
    stream, stream_options.include_usage        Ask.stream, Ask.include_usage (the usage chunk)
    any key the shapes do not declare           carried, at any depth (``carried.Unknown``); on a system
                                                message or a system or tool message's part: refused (the
                                                core holds those as text, nothing carries them)

What the types cannot say is checked by hand after the shape: tool_choice and parallel_tool_calls only
with tools; an assistant's refusal only without content; an image's data: URL and a file's file_data
decoded (a text/plain file UTF-8); a ``file_id`` refused (a file uploaded to OpenAI: no bytes to carry).
A user message right after tool messages that is the images the upstream moved out of them
(``upstream.py``'s rule) goes back into the tool results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sidecar.core.conversation import (
    Carried,
    Controls,
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    Part,
    Reasoning,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
)
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.carried import Unknown, kept, refuse_unknown
from sidecar.providers.formats.chat import compact_json
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.inline import read_data_url
from sidecar.providers.formats.openai_chat import shapes
from sidecar.providers.formats.openai_chat.vocab import (
    FORMAT_NAME,
    TOOL_ERROR_PREFIX,
    tool_image_labelled,
    tool_image_placeholder,
    tool_image_slot,
)
from sidecar.providers.formats.shapes import by_tag, declared

__all__ = ["REQUEST_KEYS", "parse_request"]

REQUEST_KEYS = declared(shapes.Request)
"""The request keys the front reads (the module's table); any other one that is not null is carried."""
_MESSAGE_KEYS = by_tag(shapes.Message, "role")
"""Each role's message keys (an assistant's ``annotations``, which an SDK sends back: read and set aside)."""
_TEXT_KEYS = declared(shapes.TextPart)


@dataclass(slots=True)
class _Result:
    """A tool result being read: its content, or its parts with the slots of the images it moved."""

    call_id: str
    name: str
    content: str
    parts: list[Part | int]
    error: bool
    carried: Carried | None

    def result(self, images: Mapping[int, ImagePart]) -> ToolCallResult:
        """The result, each slot the image it stands for (or, without one, the placeholder's own text)."""
        parts = tuple(
            p if not isinstance(p, int) else images.get(p) or TextPart(tool_image_placeholder(p)) for p in self.parts
        )
        return ToolCallResult(self.call_id, self.content, self.error, self.name, parts, self.carried)


class _Reader:
    """The messages of a request, in order (the module's table)."""

    def __init__(self) -> None:
        self.system: list[str] = []
        self.messages: list[Message] = []
        self.results: list[_Result] = []
        self.names: dict[str, str] = {}

    def read(self, m: dict[str, Any], where: str) -> None:
        role = m["role"]
        if role != "tool" and self.results:
            if role == "user" and self._end_turn(m, where):
                return  # the user message that carried the turn's images
            self._end_turn(None, where)
        if role in ("system", "developer"):  # the core joins the system prompt into one string: nothing carries it
            refuse_unknown(m, _MESSAGE_KEYS[role], where, here=True)
            read = _text_content(m.get("content"), f"{where}.content", carry=False)
            self.system.append(read if isinstance(read, str) else "".join(p.text for p in read))
            return
        carried = kept(FORMAT_NAME, m, _MESSAGE_KEYS[role], where)
        if role == "user":
            content = _user_content(m.get("content"), f"{where}.content")
            text, parts = (content, ()) if isinstance(content, str) else ("", content)
            self.messages.append(Message(Role.USER, text, parts=parts, carried=carried))
        elif role == "assistant":
            self._assistant(m, where, carried)
        else:
            self._tool(m, where, carried)

    def end(self, where: str) -> tuple[Message, ...]:
        if self.results:
            self._end_turn(None, where)
        return tuple(self.messages)

    def _assistant(self, m: dict[str, Any], where: str, carried: Carried | None) -> None:
        calls = tuple(_read_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(m.get("tool_calls") or ()))
        self.names.update((c.id, c.name) for c in calls)
        read = _text_content(m.get("content"), f"{where}.content")
        refusal = m.get("refusal")
        if refusal is not None:  # a rule between two keys
            if read:
                rule = "is read as the words of a message without content"
                raise InvalidInput(f"{where}.refusal", shown(refusal), rule, as_sent=True)
            read = refusal  # what the model said when it refused: its words, carried as its text
        text, parts = (read, ()) if isinstance(read, str) else ("", read)
        self.messages.append(Message(Role.ASSISTANT, text, calls, parts=parts, carried=carried))

    def _tool(self, m: dict[str, Any], where: str, carried: Carried | None) -> None:
        call_id = m.get("tool_call_id") or ""
        name = self.names.get(call_id, "")
        read = _text_content(m.get("content"), f"{where}.content", carry=False)
        if isinstance(read, str):
            error = read.startswith(TOOL_ERROR_PREFIX)
            self.results.append(_Result(call_id, name, read.removeprefix(TOOL_ERROR_PREFIX), [], error, carried))
            return
        parts: list[Part | int] = []
        for part in read:
            slot = tool_image_slot(part.text)
            parts.append(part if slot is None else slot)
        first = parts[0] if parts else None
        error = isinstance(first, TextPart) and first.text.startswith(TOOL_ERROR_PREFIX)
        if error and isinstance(first, TextPart):
            rest = first.text.removeprefix(TOOL_ERROR_PREFIX)
            parts[0:1] = [TextPart(rest)] if rest else []
        self.results.append(_Result(call_id, name, "", parts, error, carried))

    def _end_turn(self, user: dict[str, Any] | None, where: str) -> bool:
        """Close the turn's tool results; True when ``user`` is the message carrying their images (read)."""
        slots = [(p, r.call_id) for r in self.results for p in r.parts if isinstance(p, int)]
        images = _moved_images(user, slots, where) if user is not None and slots else None
        if user is not None and images is None:
            return False
        results = tuple(r.result(images or {}) for r in self.results)
        self.messages.append(Message(Role.TOOL, tool_results=results))
        self.results = []
        return True


def _moved_images(m: dict[str, Any], slots: list[tuple[int, str]], where: str) -> dict[int, ImagePart] | None:
    """The images of a turn's tool results, when ``m`` is exactly the user message the upstream renders
    for them (a label and an image for each slot, in order); None for any other message."""
    content = m.get("content")
    numbered = [n for n, _ in slots] == list(range(1, len(slots) + 1))
    if set(m) != {"role", "content"} or not numbered or not isinstance(content, list):
        return None
    if len(content) != 2 * len(slots):
        return None
    images: dict[int, ImagePart] = {}
    for k, (n, call_id) in enumerate(slots):
        label, image = content[2 * k], content[2 * k + 1]
        if label["type"] != "text" or tool_image_labelled(label["text"]) != (n, call_id):
            return None
        if image["type"] != "image_url":
            return None
        images[n] = _image(image, f"{where}.content[{2 * k + 1}]")
    return images


def _text_content(content: str | list[Any] | None, where: str, *, carry: bool = True) -> str | tuple[TextPart, ...]:
    """A string, null (""), or text parts (``carry``: the keys of each it does not read carried, else refused:
    a system message's parts are joined, a tool message's are read as its result's text)."""
    if not isinstance(content, list):
        return content or ""
    if not carry:
        for j, part in enumerate(content):
            refuse_unknown(part, _TEXT_KEYS, f"{where}[{j}]", here=True)
    return tuple(_text_part(part, f"{where}[{j}]") for j, part in enumerate(content))


def _text_part(part: dict[str, Any], at: str) -> TextPart:
    return TextPart(part["text"], carried=kept(FORMAT_NAME, part, _TEXT_KEYS, at))


def _user_content(content: str | list[Any] | None, where: str) -> str | tuple[Part, ...]:
    """A user message's content: a string, null, or a list of text, image_url and file parts."""
    if not isinstance(content, list):
        return content or ""
    return tuple(_PARTS[part["type"]](part, f"{where}[{j}]") for j, part in enumerate(content))


def _image(part: dict[str, Any], at: str) -> ImagePart:
    """An image_url part: a data: URL is read as its bytes, any other URL as the URL."""
    image = part["image_url"]
    unknown = Unknown(FORMAT_NAME)
    unknown.take(part, declared(shapes.ImagePart))
    unknown.take(image, declared(shapes.ImageURL), "image_url")
    carried, detail, url = unknown.carried(at), image.get("detail") or "", image["url"]
    if not url.startswith("data:"):
        return ImagePart(url=url, detail=detail, carried=carried)
    read = read_data_url(url)
    if read is None:
        rule = "a data: URL is data:<media type>;base64,<the bytes>"
        raise InvalidInput(f"{at}.image_url.url", url[:60], rule, as_sent=True)
    return ImagePart(read[0], read[1], detail=detail, carried=carried)


def _file(part: dict[str, Any], at: str) -> DocumentPart:
    """A file part: ``file_data`` (a data: URL) as its bytes; a ``file_id`` has nothing to carry."""
    file = part["file"]
    unknown = Unknown(FORMAT_NAME)
    unknown.take(part, declared(shapes.FilePart))
    unknown.take(file, declared(shapes.File), "file")
    if file.get("file_id") is not None:
        why = "names a file uploaded to OpenAI, which the sidecar has no bytes of to carry: send them as file_data"
        raise InvalidInput(f"{at}.file.file_id", file["file_id"], why, as_sent=True)
    data = file.get("file_data")
    read = None if data is None else read_data_url(data)
    if read is None:
        rule = "must be a data: URL (data:application/pdf;base64,...)"
        raise InvalidInput(f"{at}.file.file_data", shown(data)[:60], rule, as_sent=True)
    media_type, raw = read
    carried, title = unknown.carried(at), file.get("filename") or ""
    if media_type != "text/plain":
        return DocumentPart(media_type, raw, title=title, carried=carried)
    try:
        return DocumentPart(media_type, text=raw.decode("utf-8"), title=title, carried=carried)
    except UnicodeDecodeError:
        raise InvalidInput(
            f"{at}.file.file_data", "text/plain", "a text/plain file must be UTF-8", as_sent=True
        ) from None


_PARTS: Mapping[str, Callable[[dict[str, Any], str], Part]] = {"text": _text_part, "image_url": _image, "file": _file}
"""A user message's part read, by its type."""


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An OpenAI Chat Completions request as the core's ModelRequest (the module's table)."""
    shapes.REQUEST.check(body)
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, REQUEST_KEYS)
    if body.get("stream_options") is not None:  # OpenAIFront.parse reads include_usage
        unknown.take(body["stream_options"], declared(shapes.StreamOptions), "stream_options")
    reader = _Reader()
    for i, m in enumerate(body["messages"]):
        reader.read(m, f"messages[{i}]")
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(body.get("tools") or ()))
    max_tokens = body.get("max_tokens")
    return ModelRequest(
        model=body["model"],
        messages=reader.end(f"messages[{len(body['messages'])}]"),
        system="\n\n".join(reader.system),
        tools=tools,
        response_schema_json=_response_schema(body.get("response_format")),
        max_output_tokens=body.get("max_completion_tokens") if max_tokens is None else max_tokens,
        temperature=_number(body, "temperature"),
        controls=_controls(body, bool(tools), unknown),
        carried=unknown.carried(""),
    )


def _number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    return None if value is None else float(value)


def _controls(body: Mapping[str, Any], tools: bool, unknown: Unknown) -> Controls:
    for key in ("tool_choice", "parallel_tool_calls"):  # a rule between keys
        if body.get(key) is not None and not tools:
            raise InvalidInput(key, shown(body[key]), f"{key} is only allowed when tools are given", as_sent=True)
    effort, stop = body.get("reasoning_effort"), body.get("stop")
    return Controls(
        reasoning=None if effort is None else Reasoning(effort=effort),
        tool_choice=_tool_choice(body.get("tool_choice"), unknown),
        parallel_tool_calls=body.get("parallel_tool_calls"),
        stop=(stop,) if isinstance(stop, str) else tuple(stop or ()),
        top_p=_number(body, "top_p"),
        seed=body.get("seed"),
        presence_penalty=_number(body, "presence_penalty"),
        frequency_penalty=_number(body, "frequency_penalty"),
        end_user=body.get("user") or "",
    )


def _tool_choice(value: str | dict[str, Any] | None, unknown: Unknown) -> ToolChoice | None:
    if value is None or isinstance(value, str):
        return None if value is None else ToolChoice(value)
    unknown.take(value, declared(shapes.NamedToolChoice), "tool_choice")
    unknown.take(value["function"], declared(shapes.ChoiceFunction), "tool_choice", "function")
    return ToolChoice("tool", value["function"]["name"])


def _read_call(c: dict[str, Any], where: str) -> ToolCall:
    function = c["function"]
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else compact_json({} if arguments is None else arguments)
    unknown = Unknown(FORMAT_NAME)
    unknown.take(c, declared(shapes.ToolCall))
    unknown.take(function, declared(shapes.Function), "function")
    return ToolCall(c.get("id") or "", function["name"], text, unknown.carried(where))


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    function = t["function"]
    unknown = Unknown(FORMAT_NAME)
    unknown.take(t, declared(shapes.Tool))
    unknown.take(function, declared(shapes.FunctionDefinition), "function")
    parameters = function.get("parameters")
    params = "" if parameters is None else compact_json(parameters)
    described = function.get("description") or ""
    return ToolDefinition(
        function["name"], described, params, strict=function.get("strict"), carried=unknown.carried(where)
    )


def _response_schema(fmt: dict[str, Any] | None) -> str:
    if fmt is not None:  # the call's response schema holds nothing else: no element to carry another key on
        refuse_unknown(fmt, ("type", "json_schema"), "response_format")
    if fmt is None or fmt["type"] == "text":
        return ""
    if fmt["type"] == "json_object":
        return compact_json({"type": "object"})
    # its name, description and strict are not sent on (the sidecar validates against the schema either way)
    refuse_unknown(fmt["json_schema"], declared(shapes.JSONSchema), "response_format.json_schema")
    return compact_json(fmt["json_schema"]["schema"])
