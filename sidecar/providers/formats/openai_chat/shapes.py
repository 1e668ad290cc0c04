"""The OpenAI Chat Completions wire, declared once as types: the request a caller sends, the reply and the chunks.

They follow the ``openai`` Python SDK 3.57.0 (pinned in constraints.txt; the sidecar never imports it):
``openai.types.chat.completion_create_params.CompletionCreateParamsBase`` and the ``ChatCompletion*Param``
TypedDicts it names for the request, ``openai.types.chat.ChatCompletion`` and ``ChatCompletionChunk`` for the
reply. ``tests/formats/test_openai_chat_shapes.py`` holds every key declared here to the SDK's.

    shape               what it is                                  where the SDK is wider
    Request             the body ``front.parse`` reads              keys not declared here: carried
    Message             a message, tagged by its role               function, audio, name: carried (or refused
                                                                    on a system message, which no element holds)
    UserPart            a user message's part, tagged by its type   input_audio: refused (not carried)
    Tool                a function tool                             custom tools: refused by the type
    ToolChoice          a mode, or one function by name             allowed_tools, custom: refused
    ResponseFormat      text, json_object or json_schema
    Completion, Chunk   what ``render`` and ``ChunkWriter`` write

Declared narrower than the SDK, as the sidecar reads them (the type says the rule): ``n`` is 1 (one
choice is read), ``reasoning_effort`` one of the four levels, a tool call's ``type`` ``function``. Declared
wider, to read what SDKs send back: an assistant's ``annotations`` (on the API's reply message, which an SDK
passes back), a tool call's ``arguments`` as any JSON (read as compact JSON text), a tool message's
``tool_call_id`` absent (read as ""). Null is absent wherever a key is ``X | None``.
"""

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from sidecar.providers.formats.shapes import Shape

__all__ = [
    "REQUEST",
    "Chunk",
    "ChunkChoice",
    "Completion",
    "FunctionDefinition",
    "ImagePart",
    "ImageURL",
    "NamedToolChoice",
    "Request",
    "ResponseFormatJSONSchema",
    "TextPart",
    "Tool",
    "ToolCall",
    "Usage",
]

Effort = Literal["minimal", "low", "medium", "high"]

# ---------------------------------------------------------------------------- the request


class TextPart(TypedDict):
    """``ChatCompletionContentPartTextParam``."""

    type: Literal["text"]
    text: str


class ImageURL(TypedDict):
    url: str
    detail: NotRequired[Literal["auto", "low", "high"] | None]


class ImagePart(TypedDict):
    """``ChatCompletionContentPartImageParam``."""

    type: Literal["image_url"]
    image_url: ImageURL


class File(TypedDict):
    file_data: NotRequired[str | None]
    file_id: NotRequired[str | None]
    filename: NotRequired[str | None]


class FilePart(TypedDict):
    """``completion_create_params``' ``File`` part (``ChatCompletionContentPartParam``)."""

    type: Literal["file"]
    file: File


UserPart = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]
Text = str | list[TextPart] | None
"""A content that is text: a string, or text parts."""


class Function(TypedDict):
    name: str
    arguments: NotRequired[Any]


class ToolCall(TypedDict):
    """``ChatCompletionMessageFunctionToolCallParam``."""

    id: NotRequired[str | None]
    type: NotRequired[Literal["function"] | None]
    function: Function


class SystemMessage(TypedDict):
    """``ChatCompletionSystemMessageParam`` (``ChatCompletionDeveloperMessageParam``: the same, role developer)."""

    role: Literal["system"]
    content: NotRequired[Text]


class DeveloperMessage(TypedDict):
    role: Literal["developer"]
    content: NotRequired[Text]


class UserMessage(TypedDict):
    """``ChatCompletionUserMessageParam``."""

    role: Literal["user"]
    content: NotRequired[str | list[UserPart] | None]


class AssistantMessage(TypedDict):
    """``ChatCompletionAssistantMessageParam``, and ``annotations`` of ``ChatCompletionMessage``."""

    role: Literal["assistant"]
    content: NotRequired[Text]
    tool_calls: NotRequired[list[ToolCall] | None]
    refusal: NotRequired[str | None]
    annotations: NotRequired[Any]


class ToolMessage(TypedDict):
    """``ChatCompletionToolMessageParam``."""

    role: Literal["tool"]
    content: NotRequired[Text]
    tool_call_id: NotRequired[str | None]


Message = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


class FunctionDefinition(TypedDict):
    """``shared_params.FunctionDefinition``."""

    name: str
    description: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any] | None]
    strict: NotRequired[bool | None]


class Tool(TypedDict):
    """``ChatCompletionFunctionToolParam``."""

    type: NotRequired[Literal["function"]]
    function: FunctionDefinition


class ChoiceFunction(TypedDict):
    name: str


class NamedToolChoice(TypedDict):
    """``ChatCompletionNamedToolChoiceParam``."""

    type: Literal["function"]
    function: ChoiceFunction


class ResponseFormatText(TypedDict):
    type: Literal["text"]


class ResponseFormatJSONObject(TypedDict):
    type: Literal["json_object"]


class JSONSchema(TypedDict):
    name: NotRequired[str | None]
    description: NotRequired[str | None]
    schema: dict[str, Any]
    strict: NotRequired[bool | None]


class ResponseFormatJSONSchema(TypedDict):
    """``shared_params.ResponseFormatJSONSchema``."""

    type: Literal["json_schema"]
    json_schema: JSONSchema


ResponseFormat = Annotated[
    ResponseFormatText | ResponseFormatJSONObject | ResponseFormatJSONSchema, Field(discriminator="type")
]


class StreamOptions(TypedDict):
    """``ChatCompletionStreamOptionsParam``."""

    include_usage: NotRequired[bool | None]


class Request(TypedDict):
    """``CompletionCreateParamsBase``: the keys the front interprets."""

    model: str
    messages: list[Message]
    tools: NotRequired[list[Tool] | None]
    tool_choice: NotRequired[Literal["auto", "none", "required"] | NamedToolChoice | None]
    parallel_tool_calls: NotRequired[bool | None]
    response_format: NotRequired[ResponseFormat | None]
    max_tokens: NotRequired[int | None]
    max_completion_tokens: NotRequired[int | None]
    temperature: NotRequired[float | None]
    top_p: NotRequired[float | None]
    stop: NotRequired[str | list[str] | None]
    seed: NotRequired[int | None]
    presence_penalty: NotRequired[float | None]
    frequency_penalty: NotRequired[float | None]
    user: NotRequired[str | None]
    reasoning_effort: NotRequired[Effort | None]
    stream: NotRequired[bool | None]
    stream_options: NotRequired[StreamOptions | None]
    n: NotRequired[Literal[1] | None]


REQUEST = Shape(Request)
"""The request's shape, compiled once."""

# ---------------------------------------------------------------------------- the reply


class FunctionCall(TypedDict):
    name: str
    arguments: str


class ReplyToolCall(TypedDict):
    """``ChatCompletionMessageFunctionToolCall``."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class ReplyMessage(TypedDict):
    """``ChatCompletionMessage``."""

    role: Literal["assistant"]
    content: str | None
    refusal: str | None
    annotations: list[Any]
    tool_calls: NotRequired[list[ReplyToolCall]]


class Choice(TypedDict):
    index: int
    message: ReplyMessage
    logprobs: None
    finish_reason: str


class PromptDetails(TypedDict):
    cached_tokens: int


class CompletionDetails(TypedDict):
    reasoning_tokens: int


class Usage(TypedDict):
    """``CompletionUsage``."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptDetails
    completion_tokens_details: CompletionDetails


class Completion(TypedDict):
    """``ChatCompletion``, and the sidecar's extension."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None
    sidecar: NotRequired[dict[str, Any]]


class ChunkToolCall(TypedDict):
    """``choice_delta_tool_call.ChoiceDeltaToolCall``: id, type and name on a call's first fragment only."""

    index: int
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: dict[str, str]


class Delta(TypedDict, total=False):
    """``chat_completion_chunk.ChoiceDelta``."""

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
    """``ChatCompletionChunk``, and the sidecar's extension."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: str | None
    choices: list[ChunkChoice]
    usage: NotRequired[Usage | None]
    sidecar: NotRequired[dict[str, Any]]
