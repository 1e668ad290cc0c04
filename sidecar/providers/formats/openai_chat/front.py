"""The OpenAI Chat Completions front: a caller's request read, the answer rendered (whole, streamed, failed).

``OpenAIFront.parse`` reads a request into the core's (the inverse of ``upstream.OpenAIUpstream.body``)::

    request key                    what is read
    model                          the model id asked for (a catalog model or a route)
    messages                       system / developer -> system (a string or text parts, joined); user,
                                   assistant (content, tool_calls; a refusal's words as its text), tool
                                   (tool_call_id, content: TOOL_ERROR_PREFIX marks an error)
      content                      a string or null -> text; a list -> parts, in order:
        {"type": "text"}             TextPart
        {"type": "image_url"}        ImagePart: a data: URL as its bytes and media type, any other URL as
                                     the URL; detail (auto, low, high)
        {"type": "file"}             DocumentPart: file_data (a data: URL) as its bytes (a text/plain one
                                     as its text), filename as the title; a file_id is INVALID_INPUT (it
                                     names a file uploaded to OpenAI: there is nothing to carry)
                                   assistant and tool messages take text parts only; a user message right
                                   after tool messages that is the images the upstream moved out of them
                                   (``upstream.py``'s rule) goes back into the tool results
    tools                          [{"type": "function", "function": {name, description, parameters}}]
                                   (strict carried: ToolDefinition.strict; a deployment whose format
                                   has no strict mode refuses true, docs/carried.md tools.strict)
    response_format                json_schema -> its schema; json_object -> {"type": "object"}; text: none
                                   (strict true or false: every reply is validated against the schema
                                   and corrected, docs/carried.md)
    max_tokens /                   the output budget (at least 1)
      max_completion_tokens
    temperature, top_p, seed,      the same controls
      presence_penalty,
      frequency_penalty,
      parallel_tool_calls
    stop                           a string or a list of strings
    user                           end_user
    reasoning_effort               reasoning: the effort (minimal, low, medium, high)
    tool_choice                    "auto" | "none" | "required" | {"type": "function", "function": {"name"}};
                                   with parallel_tool_calls, only when tools are given
    stream, stream_options         a streamed answer; include_usage: the usage chunk before [DONE]
      .include_usage
    n                              1 only (one choice): anything else is INVALID_INPUT
    any other key                  INVALID_INPUT naming it (logprobs, metadata, audio, modalities,
                                   prediction, top_k, ...): nothing is accepted and then dropped. A key
                                   whose value is null is absent, as the API reads it. The same holds
                                   for the keys of a message, a part and a tool.

``render``, ``writer`` and ``error_body`` answer in the format::

    core                                        OpenAI answer
    ChatReply                                   {"object": "chat.completion", "choices": [{"message": {"role":
                                                "assistant", "content", "refusal", "tool_calls"}, "finish_reason"}],
                                                "usage", "system_fingerprint"}
      text                                      content (null when there is none and the reply is tool calls,
                                                a refusal, or filtered)
      finish_reason                             tool_calls when it calls a tool (unless cut off or filtered),
                                                else stop / length / content_filter; a refusal is stop
      usage                                     prompt_tokens (cached included) / completion_tokens
                                                (reasoning included) / total_tokens, prompt_tokens_details
                                                .cached_tokens, completion_tokens_details.reasoning_tokens
                                                (cache writes have no field: counted in prompt_tokens)
      reasoning                                 none: Chat Completions has no field for it
    a stream                                    "chat.completion.chunk" events: the role first, then
      TextDelta, refusal                        {"delta": {"content": text}}, {"delta": {"refusal": text}}
      ToolCallDelta                             {"delta": {"tool_calls": [{"index", "id", "type", "function":
                                                {"name", "arguments"}}]}} (id, type and name on the first fragment)
      ReasoningDelta                            nothing (no field for it, as the whole reply has none)
      the end                                   {"delta": {}, "finish_reason"}, then, when include_usage was asked,
                                                {"choices": [], "usage"} (every chunk before it: "usage": null);
                                                ``[DONE]`` last
      the sidecar's restart                     a chunk with empty ``choices`` and ``sidecar.restart``
    a failure                                   {"error": {"message", "type", "param", "code"}}; in a stream,
                                                the same object as a data event, and no [DONE]
"""

from __future__ import annotations

from collections.abc import Mapping
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
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.carried import Unknown
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import (
    bool_field,
    number_field,
    object_list,
    optional_bool,
    positive_budget,
    schema_text,
    shown,
    text_field,
)
from sidecar.providers.formats.openai_chat.vocab import (
    END_MARKER,
    ERROR_TYPES,
    FINISH_NAMES,
    FORMAT_NAME,
    TOOL_ERROR_PREFIX,
    api_key_of,
    read_data_url,
    tool_image_labelled,
    tool_image_placeholder,
    tool_image_slot,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse

__all__ = ["CHAT_ROUTE", "REQUEST_KEYS", "ChunkWriter", "OpenAIFront", "finish_name", "parse_request"]

CHAT_ROUTE = "/v1/chat/completions"

_INVALID = "invalid_request_error"
_SERVER = "server_error"
_TYPES: Mapping[str, str] = {
    "invalid_value": _INVALID,
    "context_length_exceeded": _INVALID,
    "content_policy_violation": _INVALID,
    "output_truncated": _INVALID,
    "model_not_found": _INVALID,
    "resource_not_found": _INVALID,
    "permission_denied": "permission_error",
    "insufficient_quota": "insufficient_quota",
    "spend_cap_exceeded": "insufficient_quota",
    "rate_limit_exceeded": "rate_limit_error",
    "deadline_exceeded": "timeout",
    "cancelled": "cancelled",
}
"""``error.type`` of a sidecar failure by its code (``server/http/failures.py``); every other code: server_error."""
_PARAMS: ParamNames = {
    "max_output_tokens": ("max_tokens", "max_completion_tokens"),
    "system": "messages",
    "system_cache": "messages",
    "tools[].name": "tools[].function.name",
    "tools[].parameters_json": "tools[].function.parameters",
    "tools[].strict": "tools[].function.strict",
    "tools[].cache": "tools[]",
    "response_schema_json": "response_format.json_schema.schema",
    "reasoning": "reasoning_effort",
    "tool_choice.mode": "tool_choice",
    "tool_choice.name": "tool_choice.function.name",
    "end_user": "user",
}
"""The core's parameters by the names this front's callers send (``ParamNames``)."""


class OpenAIFront:
    """The OpenAI Chat Completions format as a provider speaks it (the module's tables)."""

    path = CHAT_ROUTE
    words = "an OpenAI-compatible"
    id_prefix = "chatcmpl-"
    params = _PARAMS

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(body)
        positive_budget(request, "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens")
        stream = bool_field(body, "stream")
        choices = body.get("n")
        if choices is not None and (type(choices) is not int or choices != 1):
            raise InvalidInput("n", shown(choices), "must be 1 (the sidecar answers with one choice)")
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise InvalidInput("stream_options", shown(options), 'must be an object: {"include_usage": true}')
        # its other keys are carried (``parse_request``)
        include_usage = optional_bool(options or {}, "include_usage", "stream_options.include_usage") is True and stream
        return Ask(request, stream, include_usage)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": _content(reply),
            "refusal": reply.refusal,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = [_call(c) for c in reply.tool_calls]
        out: dict[str, Any] = {
            "id": head.reply_id,
            "object": "chat.completion",
            "created": head.created,
            "model": head.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_name(reply)}],
            "usage": _usage(reply),
            "system_fingerprint": head.fingerprint,
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> ChunkWriter:
        return ChunkWriter(head, include_usage=include_usage)

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
        error: dict[str, Any] = {"message": message, "type": error_type, "param": param, "code": code}
        if extension is not None:
            error["sidecar"] = dict(extension)
        return {"error": error}

    def answer(self, code: str, status: int) -> tuple[int, str]:
        return status, _TYPES.get(code, _SERVER)

    def error_type(self, status: int) -> str:
        return ERROR_TYPES.get(status, (_SERVER if status >= 500 else _INVALID, None))[0]

    def api_key(self, headers: Mapping[str, str]) -> str:
        return api_key_of(headers)


def finish_name(reply: ChatReply) -> str:
    """The reply's ``finish_reason``: ``tool_calls`` whenever it calls a tool and was neither cut nor filtered;
    a refusal is ``stop``."""
    if reply.refusal is not None:
        return "stop"
    if reply.tool_calls and reply.finish not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
        return "tool_calls"
    return FINISH_NAMES.get(reply.finish, "stop")


def _content(reply: ChatReply) -> str | None:
    """The text; null when there is none and the reply is tool calls, a refusal, or filtered."""
    nothing = reply.tool_calls or reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER
    return reply.text or (None if nothing else "")


def _call(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}


def _usage(reply: ChatReply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cache_read_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
    }


class ChunkWriter:
    """One streamed reply as ``chat.completion.chunk`` objects (the module's table)."""

    def __init__(self, head: ReplyHead, *, include_usage: bool = False) -> None:
        self._head: dict[str, Any] = {
            "id": head.reply_id,
            "object": "chat.completion.chunk",
            "created": head.created,
            "model": head.model,
            "system_fingerprint": head.fingerprint,
        }
        if include_usage:
            self._head["usage"] = None  # on every chunk but the usage one, as the API sends them
        self._usage = include_usage
        self._started: set[int] = set()
        """Tool calls whose first fragment (id, type, name) went out."""

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {**self._head, "choices": choices, **extra}

    def _choice(self, delta: dict[str, Any], finish: str | None = None) -> Sse:
        return ("", self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]))

    def start(self, input_tokens: int = 0) -> list[Sse]:
        """The first chunk: the assistant's role, no content yet."""
        return [self._choice({"role": "assistant", "content": "", "refusal": None})]

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return []  # Chat Completions has no reasoning field, whole or streamed (the module's table)
        if isinstance(delta, TextDelta):
            return [self._choice({"content": delta.text})]
        piece: dict[str, Any] = {"index": delta.index, "function": {"arguments": delta.arguments_fragment}}
        if delta.index not in self._started:
            self._started.add(delta.index)
            function = {"name": delta.name, "arguments": delta.arguments_fragment}
            piece = {"index": delta.index, "id": delta.id, "type": "function", "function": function}
        return [self._choice({"tool_calls": [piece]})]

    def refusal(self, text: str) -> list[Sse]:
        return [self._choice({"refusal": text})]

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._started.clear()  # a new reply follows: its tool calls start afresh
        return [("", self._chunk([], sidecar={"restart": dict(words)}))]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        extra = {} if extension is None else {"sidecar": dict(extension)}
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_name(reply)}
        if not self._usage:
            return [("", self._chunk([choice], **extra)), ("", END_MARKER)]
        usage = {**self._head, "choices": [], "usage": _usage(reply), **extra}
        return [("", self._chunk([choice])), ("", usage), ("", END_MARKER)]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("", body)]


# ---------------------------------------------------------------------------- requests read

REQUEST_KEYS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "user",
        "reasoning_effort",
        "stream",
        "stream_options",
        "n",
    }
)
"""The request keys the front reads (the module's table); any other one that is not null is carried."""
_MESSAGE_KEYS: Mapping[str, frozenset[str]] = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "refusal", "annotations"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""Each role's message keys. An assistant's ``annotations`` are what the API wrote on a reply (its url
citations), which an SDK's message sends back with it: read and set aside, they ask nothing."""
_EFFORTS = ("minimal", "low", "medium", "high")
_DETAILS = ("auto", "low", "high")


def _carried_only(obj: Mapping[str, Any], keys: frozenset[str], where: str) -> None:
    """INVALID_INPUT naming the first key of ``obj`` not in ``keys`` whose value is not null."""
    for key, value in obj.items():
        if key not in keys and value is not None:
            raise InvalidInput(
                f"{where}.{key}" if where else key,
                shown(value),
                "the sidecar does not carry this key: leave it out (docs/carried.md)",
            )


class _Result:
    """A tool result being read: its content, or its parts with the slots of the images it moved."""

    __slots__ = ("call_id", "carried", "content", "error", "name", "parts")

    def __init__(
        self, call_id: str, name: str, content: str, parts: list[Part | int], error: bool, carried: Carried | None
    ) -> None:
        self.call_id, self.name, self.content, self.parts, self.error = call_id, name, content, parts, error
        self.carried = carried

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
        role = m.get("role")
        if role != "tool" and self.results:
            if role == "user" and self._end_turn(m, where):
                return  # the user message that carried the turn's images
            self._end_turn(None, where)
        if not isinstance(role, str) or role not in _MESSAGE_KEYS:
            raise InvalidInput(f"{where}.role", shown(role), "must be system, developer, user, assistant or tool")
        unknown = Unknown(FORMAT_NAME)
        unknown.take(m, _MESSAGE_KEYS[role])
        carried = unknown.carried(where)
        content = m.get("content")
        if role in ("system", "developer"):  # the core joins the system prompt into one string: nothing carries it
            _carried_only(m, _MESSAGE_KEYS[role], where)
            self.system.append(_joined(content, f"{where}.content"))
        elif role == "user":
            read = _user_content(content, f"{where}.content")
            text, parts = (read, ()) if isinstance(read, str) else ("", read)
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
        listed = object_list(m, "tool_calls", at=where)
        calls = tuple(_read_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(listed))
        self.names.update((c.id, c.name) for c in calls)
        read = _text_content(m.get("content"), f"{where}.content")
        refusal = m.get("refusal")
        if refusal is not None:
            if not isinstance(refusal, str) or read:
                raise InvalidInput(
                    f"{where}.refusal", shown(refusal), "is read as the words of a message without content"
                )
            read = refusal  # what the model said when it refused: its words, carried as its text
        text, parts = (read, ()) if isinstance(read, str) else ("", read)
        self.messages.append(Message(Role.ASSISTANT, text, calls, parts=parts, carried=carried))

    def _tool(self, m: dict[str, Any], where: str, carried: Carried | None) -> None:
        call_id = text_field(m, "tool_call_id", f"{where}.tool_call_id")
        name = self.names.get(call_id, "")
        content = m.get("content")
        if content is None or isinstance(content, str):
            text = content or ""
            error = text.startswith(TOOL_ERROR_PREFIX)
            self.results.append(_Result(call_id, name, text.removeprefix(TOOL_ERROR_PREFIX), [], error, carried))
            return
        parts: list[Part | int] = []
        read = _text_content(content, f"{where}.content", carry=False)
        for part in () if isinstance(read, str) else read:
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
        if not (isinstance(label, dict) and label.get("type") == "text" and isinstance(label.get("text"), str)):
            return None
        if tool_image_labelled(label["text"]) != (n, call_id):
            return None
        if not (isinstance(image, dict) and image.get("type") == "image_url"):
            return None
        images[n] = _image(image, f"{where}.content[{2 * k + 1}]")
    return images


def _joined(content: Any, where: str) -> str:
    """A system message's content: a string, null, or a list of text parts (joined)."""
    read = _text_content(content, where, carry=False)
    return read if isinstance(read, str) else "".join(p.text for p in read)


def _text_content(content: Any, where: str, *, carry: bool = True) -> str | tuple[TextPart, ...]:
    """A string, null (""), or a list of text parts (``carry``: the keys of each it does not read carried, else
    refused: a system message's parts are joined, a tool message's are read as its result's text)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidInput(where, shown(content), "must be a string or a list of text parts")
    parts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            kind = part.get("type") if isinstance(part, dict) else part
            raise InvalidInput(f"{where}[{j}]", shown(kind), "must be a text part (this message carries text only)")
        if not carry:
            _carried_only(part, _TEXT_KEYS, f"{where}[{j}]")
        parts.append(_text_part(part, f"{where}[{j}]"))
    return tuple(parts)


_TEXT_KEYS = frozenset({"type", "text"})


def _text_part(part: dict[str, Any], at: str) -> TextPart:
    unknown = Unknown(FORMAT_NAME)
    unknown.take(part, _TEXT_KEYS)
    if not isinstance(part.get("text"), str):
        raise InvalidInput(f"{at}.text", shown(part.get("text")), "must be the text (a string)")
    return TextPart(part["text"], carried=unknown.carried(at))


def _user_content(content: Any, where: str) -> str | tuple[Part, ...]:
    """A user message's content: a string, null, or a list of text, image_url and file parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidInput(where, shown(content), "must be a string or a list of content parts")
    parts: list[Part] = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict) or kind not in ("text", "image_url", "file"):
            shown_kind = kind if isinstance(part, dict) else part
            raise InvalidInput(at, shown(shown_kind), "must be a text, image_url or file part (docs/carried.md)")
        parts.append(
            _text_part(part, at) if kind == "text" else _image(part, at) if kind == "image_url" else _file(part, at)
        )
    return tuple(parts)


def _image(part: dict[str, Any], at: str) -> ImagePart:
    """``{"type": "image_url", "image_url": {"url", "detail"}}``: a data: URL is read as its bytes."""
    unknown = Unknown(FORMAT_NAME)
    unknown.take(part, frozenset({"type", "image_url"}))
    image = part.get("image_url")
    if not isinstance(image, dict) or not isinstance(image.get("url"), str):
        raise InvalidInput(at, shown(image), 'an image_url part is {"image_url": {"url": an https or data: URL}}')
    unknown.take(image, frozenset({"url", "detail"}), "image_url")
    carried = unknown.carried(at)
    detail = text_field(image, "detail", f"{at}.image_url.detail")
    if detail and detail not in _DETAILS:
        raise InvalidInput(f"{at}.image_url.detail", shown(detail), "must be auto, low or high")
    url: str = image["url"]
    if not url.startswith("data:"):
        return ImagePart(url=url, detail=detail, carried=carried)
    read = read_data_url(url)
    if read is None:
        raise InvalidInput(f"{at}.image_url.url", url[:60], "a data: URL is data:<media type>;base64,<the bytes>")
    return ImagePart(read[0], read[1], detail=detail, carried=carried)


def _file(part: dict[str, Any], at: str) -> DocumentPart:
    """``{"type": "file", "file": {"file_data": a data: URL, "filename"}}``; a ``file_id`` has nothing to carry."""
    unknown = Unknown(FORMAT_NAME)
    unknown.take(part, frozenset({"type", "file"}))
    file = part.get("file")
    if not isinstance(file, dict):
        raise InvalidInput(at, shown(file), 'a file part is {"file": {"file_data", "filename"}}')
    unknown.take(file, frozenset({"file_data", "filename", "file_id"}), "file")
    carried = unknown.carried(at)
    if file.get("file_id") is not None:
        raise InvalidInput(
            f"{at}.file.file_id",
            shown(file["file_id"]),
            "names a file uploaded to OpenAI, which the sidecar has no bytes of to carry: send them as file_data",
        )
    data, filename = file.get("file_data"), file.get("filename")
    read = read_data_url(data) if isinstance(data, str) else None
    if read is None:
        raise InvalidInput(
            f"{at}.file.file_data", shown(data)[:60], "must be a data: URL (data:application/pdf;base64,...)"
        )
    if filename is not None and not isinstance(filename, str):
        raise InvalidInput(f"{at}.file.filename", shown(filename), "must be the file's name (a string)")
    media_type, raw = read
    if media_type != "text/plain":
        return DocumentPart(media_type, raw, title=filename or "", carried=carried)
    try:
        return DocumentPart(media_type, text=raw.decode("utf-8"), title=filename or "", carried=carried)
    except UnicodeDecodeError:
        raise InvalidInput(f"{at}.file.file_data", "text/plain", "a text/plain file must be UTF-8") from None


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An OpenAI Chat Completions request as the core's ModelRequest (the module's table)."""
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, REQUEST_KEYS)
    options = body.get("stream_options")
    if isinstance(options, dict):  # OpenAIFront.parse reads include_usage
        unknown.take(options, frozenset({"include_usage"}), "stream_options")
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    reader = _Reader()
    for i, m in enumerate(object_list(body, "messages", required=True)):
        reader.read(m, f"messages[{i}]")
    messages = reader.end(f"messages[{len(body['messages'])}]")
    max_tokens = number_field(body, "max_tokens", int)
    if max_tokens is None:
        max_tokens = number_field(body, "max_completion_tokens", int)
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(object_list(body, "tools")))
    return ModelRequest(
        model=model,
        messages=messages,
        system="\n\n".join(reader.system),
        tools=tools,
        response_schema_json=_response_schema(body.get("response_format")),
        max_output_tokens=max_tokens,
        temperature=number_field(body, "temperature", float),
        controls=_controls(body, bool(tools), unknown),
        carried=unknown.carried(""),
    )


def _controls(body: Mapping[str, Any], tools: bool, unknown: Unknown) -> Controls:
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in _EFFORTS:
        raise InvalidInput("reasoning_effort", shown(effort), f"must be one of {', '.join(_EFFORTS)}")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidInput("parallel_tool_calls", shown(parallel), "must be true or false")
    choice = _tool_choice(body.get("tool_choice"), unknown)
    for key, value in (("tool_choice", choice), ("parallel_tool_calls", parallel)):
        if value is not None and not tools:
            raise InvalidInput(key, shown(body[key]), f"{key} is only allowed when tools are given")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidInput("user", shown(user), "must be the end user's id (a string)")
    return Controls(
        reasoning=None if effort is None else Reasoning(effort=effort),
        tool_choice=choice,
        parallel_tool_calls=parallel,
        stop=_stop(body.get("stop")),
        top_p=number_field(body, "top_p", float),
        seed=number_field(body, "seed", int),
        presence_penalty=number_field(body, "presence_penalty", float),
        frequency_penalty=number_field(body, "frequency_penalty", float),
        end_user=user or "",
    )


def _tool_choice(value: Any, unknown: Unknown) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return ToolChoice(value)
    function = value.get("function") if isinstance(value, dict) else None
    if not isinstance(value, dict) or value.get("type") != "function" or not isinstance(function, dict):
        function = None
    name = function.get("name") if function is not None else None
    if function is None or not isinstance(name, str):
        raise InvalidInput(
            "tool_choice",
            shown(value),
            'must be "auto", "none", "required" or {"type": "function", "function": {"name": a tool\'s name}}',
        )
    unknown.take(value, frozenset({"type", "function"}), "tool_choice")
    unknown.take(function, frozenset({"name"}), "tool_choice", "function")
    return ToolChoice("tool", name)


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise InvalidInput("stop", shown(value), "must be a string or a list of strings")
    return tuple(value)


def _read_call(c: dict[str, Any], where: str) -> ToolCall:
    function = c.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidInput(f"{where}.function", shown(function), "must name the function called")
    if c.get("type") not in (None, "function"):  # a custom tool's call is no function's
        raise InvalidInput(f"{where}.type", shown(c.get("type")), 'must be "function"')
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else compact_json(arguments if arguments is not None else {})
    unknown = Unknown(FORMAT_NAME)
    unknown.take(c, frozenset({"id", "type", "function"}))
    unknown.take(function, frozenset({"name", "arguments"}), "function")
    return ToolCall(text_field(c, "id", f"{where}.id"), function["name"], text, unknown.carried(where))


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    function = t.get("function")
    if t.get("type", "function") != "function" or not isinstance(function, dict):
        raise InvalidInput(where, shown(t.get("type")), 'must be {"type": "function", "function": {...}}')
    unknown = Unknown(FORMAT_NAME)
    unknown.take(t, frozenset({"type", "function"}))
    name = function.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.function.name", shown(name), "must be the tool's name")
    unknown.take(function, frozenset({"name", "description", "parameters", "strict"}), "function")
    strict = optional_bool(function, "strict", f"{where}.function.strict")
    parameters = function.get("parameters")
    params = "" if parameters is None else schema_text(parameters, f"{where}.function.parameters")
    described = text_field(function, "description", f"{where}.function.description")
    return ToolDefinition(name, described, params, strict=strict, carried=unknown.carried(where))


def _response_schema(fmt: Any) -> str:
    if fmt is None:
        return ""
    if not isinstance(fmt, dict):
        raise InvalidInput("response_format", shown(fmt), "must be an object")
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = None
        if isinstance(spec, dict):
            _carried_only(spec, frozenset({"name", "description", "schema", "strict"}), "response_format.json_schema")
            optional_bool(spec, "strict", "response_format.json_schema.strict")  # the sidecar validates either way
            for key in ("name", "description"):  # not sent on (the schema is what the sidecar holds to): but text
                text_field(spec, key, f"response_format.json_schema.{key}")
            schema = spec.get("schema")
        return schema_text(schema, "response_format.json_schema.schema")
    if kind == "json_object":
        return compact_json({"type": "object"})
    if kind in (None, "text"):
        return ""
    raise InvalidInput("response_format.type", shown(kind), "must be text, json_object or json_schema")
