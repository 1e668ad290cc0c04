"""The Anthropic Messages shapes, declared once: the request a front reads, the reply it writes.

They follow the ``anthropic`` SDK 2.17.0 (pinned in constraints.txt; the sidecar never imports it), under
its names: ``message_create_params.MessageCreateParamsBase`` and the param ``TypedDict``s it references for
the request; ``Message``, its blocks, ``Usage`` and the ``Raw*Event`` stream events for the reply
(``tests/formats/test_anthropic_shapes.py`` walks the SDK's types beside these, key by key). A request
shape declares the keys the front interprets: any other is carried (``carried.Unknown``). Where the
sidecar reads a request otherwise than the SDK types it::

    max_tokens, tools[].input_schema,         optional (the catalog's default output budget; a tool of no
      tool_use.input, tool_use_id, tool_use.id  parameters; no arguments; no id)
    an image's media_type                     any text: the provider judges it
    messages[].role                           user or assistant: the system prompt is ``system``
    blocks, sources, tools, thinking          those the core has a part or a field for (no server tool,
                                              search result, file source, or thinking between tools)
    output_config.effort                      the core's levels: low, medium, high
    temperature, top_p, top_k                 read, though the SDK at this version types none of them (the
                                              API's sampling parameters: callers send them, the core has them)
    max_tokens, thinking.budget_tokens        at least 1 (the API's own bounds are the upstream's ``check``)

The reply shapes type what ``front.render`` and ``front.EventWriter`` write; ``upstream`` reads a
provider's reply tolerantly (a key of the wrong type is skipped), so it reads them as plain JSON.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

__all__ = ["BlockDelta", "MessageCreateParams", "MessageReply", "ReplyBlock", "UsageReply"]

# ---------------------------------------------------------------------------- the request


class CacheControlEphemeralParam(TypedDict):
    type: Literal["ephemeral"]
    ttl: NotRequired[Literal["5m", "1h"] | None]


class TextBlockParam(TypedDict):
    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControlEphemeralParam | None]


class Base64ImageSourceParam(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class URLSourceParam(TypedDict):
    """The SDK's ``URLImageSourceParam`` and ``URLPDFSourceParam``: the same keys."""

    type: Literal["url"]
    url: str


class ImageBlockParam(TypedDict):
    type: Literal["image"]
    source: Annotated[Base64ImageSourceParam | URLSourceParam, Field(discriminator="type")]
    cache_control: NotRequired[CacheControlEphemeralParam | None]


class Base64PDFSourceParam(TypedDict):
    type: Literal["base64"]
    media_type: Literal["application/pdf"]
    data: str


class PlainTextSourceParam(TypedDict):
    type: Literal["text"]
    media_type: Literal["text/plain"]
    data: str


class DocumentBlockParam(TypedDict):
    type: Literal["document"]
    source: Annotated[Base64PDFSourceParam | PlainTextSourceParam | URLSourceParam, Field(discriminator="type")]
    title: NotRequired[str | None]
    cache_control: NotRequired[CacheControlEphemeralParam | None]


class ToolResultBlockParam(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: NotRequired[str | None]
    content: NotRequired[str | list[Annotated[TextBlockParam | ImageBlockParam, Field(discriminator="type")]] | None]
    is_error: NotRequired[bool | None]
    cache_control: NotRequired[CacheControlEphemeralParam | None]


Source = Base64ImageSourceParam | Base64PDFSourceParam | PlainTextSourceParam | URLSourceParam


class ToolUseBlockParam(TypedDict):
    type: Literal["tool_use"]
    id: NotRequired[str | None]
    name: str
    input: NotRequired[Any]


class ThinkingBlockParam(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlockParam(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


UserBlock = TextBlockParam | ImageBlockParam | DocumentBlockParam | ToolResultBlockParam
AssistantBlock = TextBlockParam | ThinkingBlockParam | RedactedThinkingBlockParam | ToolUseBlockParam


class UserMessageParam(TypedDict):
    role: Literal["user"]
    content: str | list[Annotated[UserBlock, Field(discriminator="type")]]


class AssistantMessageParam(TypedDict):
    role: Literal["assistant"]
    content: str | list[Annotated[AssistantBlock, Field(discriminator="type")]]


class ToolParam(TypedDict):
    name: str
    description: NotRequired[str | None]
    input_schema: NotRequired[dict[str, Any] | None]
    cache_control: NotRequired[CacheControlEphemeralParam | None]
    strict: NotRequired[bool | None]
    type: NotRequired[Literal["custom"] | None]


class ToolChoiceAutoParam(TypedDict):
    type: Literal["auto"]
    disable_parallel_tool_use: NotRequired[bool | None]


class ToolChoiceAnyParam(TypedDict):
    type: Literal["any"]
    disable_parallel_tool_use: NotRequired[bool | None]


class ToolChoiceToolParam(TypedDict):
    type: Literal["tool"]
    name: str
    disable_parallel_tool_use: NotRequired[bool | None]


class ToolChoiceNoneParam(TypedDict):
    type: Literal["none"]


ToolChoiceParam = ToolChoiceAutoParam | ToolChoiceAnyParam | ToolChoiceToolParam | ToolChoiceNoneParam


class MetadataParam(TypedDict):
    user_id: NotRequired[str | None]


class ThinkingConfigEnabledParam(TypedDict):
    type: Literal["enabled"]
    budget_tokens: Annotated[int, Field(ge=1)]


class ThinkingConfigAdaptiveParam(TypedDict):
    type: Literal["adaptive"]


class ThinkingConfigDisabledParam(TypedDict):
    type: Literal["disabled"]


ThinkingConfigParam = ThinkingConfigEnabledParam | ThinkingConfigAdaptiveParam | ThinkingConfigDisabledParam


class JSONOutputFormatParam(TypedDict):
    type: Literal["json_schema"]
    schema: dict[str, Any]


class OutputConfigParam(TypedDict):
    effort: NotRequired[Literal["low", "medium", "high"] | None]
    format: NotRequired[JSONOutputFormatParam | None]


class MessageCreateParams(TypedDict):
    model: str
    messages: list[Annotated[UserMessageParam | AssistantMessageParam, Field(discriminator="role")]]
    max_tokens: NotRequired[Annotated[int, Field(ge=1)] | None]
    system: NotRequired[str | list[TextBlockParam] | None]
    tools: NotRequired[list[ToolParam] | None]
    tool_choice: NotRequired[Annotated[ToolChoiceParam, Field(discriminator="type")] | None]
    temperature: NotRequired[float | None]
    top_p: NotRequired[float | None]
    top_k: NotRequired[int | None]
    stop_sequences: NotRequired[list[str] | None]
    metadata: NotRequired[MetadataParam | None]
    thinking: NotRequired[Annotated[ThinkingConfigParam, Field(discriminator="type")] | None]
    output_config: NotRequired[OutputConfigParam | None]
    stream: NotRequired[bool | None]


# ---------------------------------------------------------------------------- the reply


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


ReplyBlock = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock


class TextDelta(TypedDict):
    type: Literal["text_delta"]
    text: str


class InputJSONDelta(TypedDict):
    type: Literal["input_json_delta"]
    partial_json: str


class ThinkingDelta(TypedDict):
    type: Literal["thinking_delta"]
    thinking: str


class SignatureDelta(TypedDict):
    type: Literal["signature_delta"]
    signature: str


BlockDelta = TextDelta | InputJSONDelta | ThinkingDelta | SignatureDelta
"""A ``content_block_delta`` event's ``delta``."""


class OutputTokensDetails(TypedDict):
    thinking_tokens: int


class UsageReply(TypedDict):
    """``Usage`` (and a stream's ``MessageDeltaUsage``): the cache's and the thinking's counts when not 0."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: NotRequired[int]
    cache_read_input_tokens: NotRequired[int]
    output_tokens_details: NotRequired[OutputTokensDetails]


class MessageReply(TypedDict):
    """``Message``; ``sidecar`` is the sidecar's extension (docs/http.md), no key of the SDK's."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ReplyBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: UsageReply
    sidecar: NotRequired[dict[str, Any]]
