"""The Converse request and reply, declared as types: bedrock-runtime's service model as botocore 1.44.5 publishes it.

Each ``TypedDict`` follows the service model's shape of that name (``botocore/data/bedrock-runtime/2023-09-30/
service-2.json``, compared member by member in ``tests/formats/test_bedrock_converse_shapes.py``), keeping only
the members the sidecar interprets; the sidecar never loads the model. The request shapes are closed: the
format has no door, so a key they do not declare is refused by name, not carried (nothing is accepted and
then dropped). A union of the model (a block, a source, a tool choice) is a ``TypedDict`` of its members,
each optional: that it holds exactly one is the front's check (``front._only``)::

    ConverseRequest                 ConverseRequest (``stream``: the URL's method, put in by ``routed``)
    UserMessage, AssistantMessage   Message, told apart by its role; their blocks ContentBlock's members
                                    the sidecar reads in that role
    SystemBlock, ToolEntry          SystemContentBlock, Tool
    ModelFields, Thinking           additionalModelRequestFields (a Document: the model's own keys; the
                                    front reads Anthropic's ``thinking``, the rest travels as options)
    Response, Usage                 ConverseResponse, TokenUsage: what ``render`` writes (its message an
                                    AssistantMessage)
    MessageStart ... Metadata       ConverseStreamOutput's events: what the stream writer writes

The replies are what the sidecar writes, checked by mypy; the upstream reads a provider's reply
tolerantly (``upstream.BedrockStream``), not against these.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from sidecar.providers.formats.shapes import Shape

__all__ = [
    "REQUEST",
    "AssistantBlock",
    "BlockDelta",
    "ConverseRequest",
    "ErrorBody",
    "Metadata",
    "Response",
    "Usage",
    "UserBlock",
]

ImageFormat = Literal["png", "jpeg", "gif", "webp"]


class Empty(TypedDict, closed=True):
    """AutoToolChoice, AnyToolChoice: no members."""


class CachePoint(TypedDict, closed=True):
    type: Literal["default"]
    ttl: NotRequired[Literal["5m", "1h"] | None]


class S3Location(TypedDict, closed=True):
    uri: str


class ImageSource(TypedDict, total=False, closed=True):
    bytes: str | None
    s3Location: S3Location | None


class Image(TypedDict, closed=True):
    format: ImageFormat
    source: ImageSource


class DocumentSource(TypedDict, closed=True):
    bytes: str


class Document(TypedDict, closed=True):
    format: Literal["pdf", "txt"]
    name: str
    source: DocumentSource


class ToolUse(TypedDict, closed=True):
    toolUseId: str
    name: str
    input: NotRequired[dict[str, Any] | None]


class ToolResultContent(TypedDict, total=False, closed=True):
    text: str | None
    image: Image | None


class ToolResult(TypedDict, closed=True):
    toolUseId: str
    content: list[ToolResultContent]
    status: NotRequired[Literal["success", "error"] | None]


class ReasoningText(TypedDict, closed=True):
    text: str
    signature: NotRequired[str | None]


class ReasoningContent(TypedDict, total=False, closed=True):
    reasoningText: ReasoningText | None
    redactedContent: str | None


class UserBlock(TypedDict, total=False, closed=True):
    text: str | None
    image: Image | None
    document: Document | None
    toolResult: ToolResult | None
    cachePoint: CachePoint | None


class AssistantBlock(TypedDict, total=False, closed=True):
    text: str | None
    reasoningContent: ReasoningContent | None
    toolUse: ToolUse | None
    cachePoint: CachePoint | None


class UserMessage(TypedDict, closed=True):
    role: Literal["user"]
    content: list[UserBlock]


class AssistantMessage(TypedDict, closed=True):
    role: Literal["assistant"]
    content: list[AssistantBlock]


class SystemBlock(TypedDict, total=False, closed=True):
    text: str | None
    cachePoint: CachePoint | None


class InferenceConfig(TypedDict, total=False, closed=True):
    maxTokens: int | None
    temperature: float | None
    topP: float | None
    stopSequences: list[str] | None


class InputSchema(TypedDict, closed=True):
    json: dict[str, Any]


class ToolSpec(TypedDict, closed=True):
    name: str
    description: NotRequired[str | None]
    inputSchema: InputSchema


class ToolEntry(TypedDict, total=False, closed=True):
    toolSpec: ToolSpec | None
    cachePoint: CachePoint | None


class NamedTool(TypedDict, closed=True):
    name: str


class ToolChoice(TypedDict, total=False, closed=True):
    auto: Empty | None
    any: Empty | None
    tool: NamedTool | None


class ToolConfig(TypedDict, closed=True):
    tools: list[ToolEntry]
    toolChoice: NotRequired[ToolChoice | None]


class Thinking(TypedDict, closed=True):
    type: Literal["enabled"]
    budget_tokens: NotRequired[int | None]


class ModelFields(TypedDict):
    """Open: a model's other keys are carried as they are, as provider options."""

    thinking: NotRequired[Thinking | None]


class ConverseRequest(TypedDict, closed=True):
    modelId: str
    stream: NotRequired[bool | None]
    messages: list[Annotated[UserMessage | AssistantMessage, Field(discriminator="role")]]
    system: NotRequired[list[SystemBlock] | None]
    inferenceConfig: NotRequired[InferenceConfig | None]
    toolConfig: NotRequired[ToolConfig | None]
    additionalModelRequestFields: NotRequired[ModelFields | None]
    guardrailConfig: NotRequired[dict[str, Any] | None]
    performanceConfig: NotRequired[dict[str, Any] | None]
    serviceTier: NotRequired[dict[str, Any] | None]
    outputConfig: NotRequired[dict[str, Any] | None]
    promptVariables: NotRequired[dict[str, Any] | None]
    requestMetadata: NotRequired[dict[str, str] | None]
    additionalModelResponseFieldPaths: NotRequired[list[str] | None]


REQUEST = Shape(ConverseRequest)
"""The request's shape, checked once at the top of ``front.parse_request``."""


# ---------------------------------------------------------------------------- what the sidecar writes


class Usage(TypedDict):
    inputTokens: int
    outputTokens: int
    totalTokens: int
    cacheReadInputTokens: NotRequired[int]
    cacheWriteInputTokens: NotRequired[int]


class Metrics(TypedDict):
    latencyMs: int


class Output(TypedDict):
    message: AssistantMessage


class Response(TypedDict):
    output: Output
    stopReason: str
    usage: Usage
    metrics: Metrics
    sidecar: NotRequired[dict[str, Any]]
    """The sidecar's own extension (not Converse's)."""


class ToolUseStart(TypedDict):
    toolUseId: str
    name: str


class BlockStart(TypedDict):
    toolUse: ToolUseStart


class ToolUseDelta(TypedDict):
    input: str


class ReasoningDelta(TypedDict, total=False):
    text: str
    signature: str
    redactedContent: str


class BlockDelta(TypedDict, total=False):
    """ContentBlockDelta: one member."""

    text: str
    toolUse: ToolUseDelta
    reasoningContent: ReasoningDelta


class MessageStart(TypedDict):
    role: Literal["assistant"]


class ContentBlockStart(TypedDict):
    start: BlockStart
    contentBlockIndex: int


class ContentBlockDelta(TypedDict):
    delta: BlockDelta
    contentBlockIndex: int


class ContentBlockStop(TypedDict):
    contentBlockIndex: int


class MessageStop(TypedDict):
    stopReason: str


class Metadata(TypedDict):
    usage: Usage
    metrics: Metrics
    sidecar: NotRequired[dict[str, Any]]


class ErrorBody(TypedDict):
    """An error answer's body (its type is the ``x-amzn-ErrorType`` header's) and an exception event's."""

    message: str
    sidecar: NotRequired[dict[str, Any]]
