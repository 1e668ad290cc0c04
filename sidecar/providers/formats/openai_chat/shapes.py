"""The OpenAI Chat Completions wire, declared once as types: the request a caller sends, the reply and the chunks.

They follow the ``openai`` Python SDK 3.63.0 (pinned in constraints.txt; the sidecar never imports it), the
``openai.types.chat`` types below; ``tests/formats/test_openai_chat_shapes.py`` holds every key declared here
to the SDK's. ``REQUEST`` is the request's shape, checked once by ``request.parse_request``::

    shape                   the SDK's                                   where the SDK is wider
    Request                 completion_create_params.                   a key not declared here: carried
                              CompletionCreateParams(Non)Streaming
    Message (by role)       ChatCompletion{System,Developer,User,       name, audio, function_call: carried
                              Assistant,Tool}MessageParam               (on a system message: refused)
    UserPart (by type)      ChatCompletionContentPart{Text,Image}Param, input_audio: refused (not carried)
                              chat_completion_content_part_param.File
    ToolCall                ChatCompletionMessageFunctionToolCallParam  a custom tool's call: refused
    Tool                    ChatCompletionFunctionToolParam,            a custom tool: refused
                              shared_params.FunctionDefinition
    tool_choice             a mode, ChatCompletionNamedToolChoiceParam  allowed_tools, custom: refused
    ResponseFormat          shared_params.ResponseFormat{Text,
                              JSONObject,JSONSchema}
    StreamOptions           ChatCompletionStreamOptionsParam
    Completion              ChatCompletion (ChatCompletionMessage,      what ``render`` writes
                              CompletionUsage ...)
    Chunk                   ChatCompletionChunk (chat_completion_chunk  what ``ChunkWriter`` writes
                              .ChoiceDelta ...)

Declared narrower than the SDK, as the sidecar reads them (the type says the rule): ``n`` is 1 (one
choice is read), ``reasoning_effort`` one of four levels, a tool call's ``type`` ``function``. Declared
wider, to read what SDKs send back: an assistant's ``annotations`` (on the API's reply message, which an SDK
passes back), a tool call's ``arguments`` as any JSON (read as compact JSON text), a tool message's
``tool_call_id`` absent (read as ""). Null is absent wherever a key is ``X | None``.
"""

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from sidecar.providers.formats.shapes import Shape

_Effort = Literal["minimal", "low", "medium", "high"]
_One = Annotated[int, Field(ge=1, le=1)]
"""1 and no other number (not ``Literal[1]``, which takes true): ``n``, one choice read."""

# ---------------------------------------------------------------------------- the request


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ImageURL(TypedDict):
    url: str
    detail: NotRequired[Literal["auto", "low", "high"] | None]


class ImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: ImageURL


class File(TypedDict):
    file_data: NotRequired[str | None]
    file_id: NotRequired[str | None]
    filename: NotRequired[str | None]


class FilePart(TypedDict):
    type: Literal["file"]
    file: File


_UserPart = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]
Text = str | list[TextPart] | None
"""A content that is text: a string, or text parts."""


class Function(TypedDict):
    name: str
    arguments: NotRequired[Any]


class ToolCall(TypedDict):
    id: NotRequired[str | None]
    type: NotRequired[Literal["function"] | None]
    function: Function


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: NotRequired[Text]


class DeveloperMessage(TypedDict):
    role: Literal["developer"]
    content: NotRequired[Text]


class UserMessage(TypedDict):
    role: Literal["user"]
    content: NotRequired[str | list[_UserPart] | None]


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: NotRequired[Text]
    tool_calls: NotRequired[list[ToolCall] | None]
    refusal: NotRequired[str | None]
    annotations: NotRequired[Any]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    content: NotRequired[Text]
    tool_call_id: NotRequired[str | None]


Message = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


class FunctionDefinition(TypedDict):
    name: str
    description: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any] | None]
    strict: NotRequired[bool | None]


class Tool(TypedDict):
    type: NotRequired[Literal["function"]]
    function: FunctionDefinition


class ChoiceFunction(TypedDict):
    name: str


class NamedToolChoice(TypedDict):
    type: Literal["function"]
    function: ChoiceFunction


class _ResponseFormatText(TypedDict):
    type: Literal["text"]


class _ResponseFormatJSONObject(TypedDict):
    type: Literal["json_object"]


class JSONSchema(TypedDict):
    name: NotRequired[str | None]
    description: NotRequired[str | None]
    schema: dict[str, Any]
    strict: NotRequired[bool | None]


class _ResponseFormatJSONSchema(TypedDict):
    type: Literal["json_schema"]
    json_schema: JSONSchema


_ResponseFormat = Annotated[
    _ResponseFormatText | _ResponseFormatJSONObject | _ResponseFormatJSONSchema, Field(discriminator="type")
]


class StreamOptions(TypedDict):
    include_usage: NotRequired[bool | None]


class Request(TypedDict):
    model: str
    messages: list[Message]
    tools: NotRequired[list[Tool] | None]
    tool_choice: NotRequired[Literal["auto", "none", "required"] | NamedToolChoice | None]
    parallel_tool_calls: NotRequired[bool | None]
    response_format: NotRequired[_ResponseFormat | None]
    max_tokens: NotRequired[int | None]
    max_completion_tokens: NotRequired[int | None]
    temperature: NotRequired[float | None]
    top_p: NotRequired[float | None]
    stop: NotRequired[str | list[str] | None]
    seed: NotRequired[int | None]
    presence_penalty: NotRequired[float | None]
    frequency_penalty: NotRequired[float | None]
    user: NotRequired[str | None]
    reasoning_effort: NotRequired[_Effort | None]
    stream: NotRequired[bool | None]
    stream_options: NotRequired[StreamOptions | None]
    n: NotRequired[_One | None]


REQUEST = Shape(Request)

# ---------------------------------------------------------------------------- the reply


class _FunctionCall(TypedDict):
    name: str
    arguments: str


class ReplyToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: _FunctionCall


class ReplyMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    refusal: str | None
    annotations: list[Any]
    tool_calls: NotRequired[list[ReplyToolCall]]


class _Choice(TypedDict):
    index: int
    message: ReplyMessage
    logprobs: None
    finish_reason: str


class _PromptDetails(TypedDict):
    cached_tokens: int


class _CompletionDetails(TypedDict):
    reasoning_tokens: int


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: _PromptDetails
    completion_tokens_details: _CompletionDetails


class Completion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[_Choice]
    usage: Usage
    system_fingerprint: str | None
    sidecar: NotRequired[dict[str, Any]]


class ChunkToolCall(TypedDict):
    index: int
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: dict[str, str]


class Delta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str
    refusal: str | None
    tool_calls: list[ChunkToolCall]


class ChunkChoice(TypedDict):
    index: int
    delta: Delta
    logprobs: None
    finish_reason: str | None


class Chunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: str | None
    choices: list[ChunkChoice]
    usage: NotRequired[Usage | None]
    sidecar: NotRequired[dict[str, Any]]
