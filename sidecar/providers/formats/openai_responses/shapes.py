"""The OpenAI Responses format's shapes, declared once: the request the front reads and the reply it writes.

They follow the ``openai`` SDK 3.63.0 (pinned in constraints.txt), whose ``openai.types.responses``
TypedDicts they copy as far as the sidecar reads them; the sidecar never imports the SDK, and
``tests/formats/test_openai_responses_shapes.py`` proves every key here is the SDK's (a reply's too, but for
the sidecar's own extension and the two keys it names)::

    shape                           the SDK's type (openai.types.responses., or openai.types.shared_params.)
    Request                         response_create_params.ResponseCreateParamsBase (stream: ...Streaming)
    SystemMessage, UserMessage,     easy_input_message_param.EasyInputMessageParam (and response_input_item_param
      AssistantMessage                .Message, response_output_message_param.ResponseOutputMessageParam)
    FunctionCall                    response_function_tool_call_param.ResponseFunctionToolCallParam
    FunctionCallOutput              response_input_item_param.FunctionCallOutput
    ReasoningItem, SummaryText      response_reasoning_item_param.ResponseReasoningItemParam, .Summary
    InputText, InputImage,          response_input_text_param.ResponseInputTextParam, response_input_image_param
      InputFile                       .ResponseInputImageParam, response_input_file_param.ResponseInputFileParam
    OutputText, Refusal             response_output_text_param.ResponseOutputTextParam, response_output_refusal_param
    FunctionTool                    function_tool_param.FunctionToolParam
    ToolChoiceFunction              tool_choice_function_param.ToolChoiceFunctionParam
    TextConfig, JsonSchemaFormat,   response_text_config_param.ResponseTextConfigParam, response_format_text_json_
      JsonObjectFormat, TextFormat    schema_config_param..., shared_params.response_format_{json_object,text}
    ReasoningConfig                 shared_params.reasoning.Reasoning
    the reply: Response, Usage,     response.Response, response_usage.ResponseUsage, response_output_message
      OutputMessage, OutputCall,      .ResponseOutputMessage, response_function_tool_call.ResponseFunctionToolCall,
      OutputReasoning, Event          response_reasoning_item.ResponseReasoningItem, response_stream_event (each
                                      event's keys, in one shape)

The sidecar reads less than the SDK declares, and says so in its types: function tools only (it
carries no built-in tool), the four input items a stateless conversation holds, the efforts the
core knows, and ``include`` only the reasoning's encrypted content. An id or a status the front sets
aside is only held to be a string. The upstream reads a provider's reply tolerantly, not by these.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Discriminator, Field, Tag
from typing_extensions import TypedDict

from sidecar.providers.formats.shapes import Shape

# ---------------------------------------------------------------------------- content parts


class InputText(TypedDict):
    type: Literal["input_text"]
    text: str


class OutputText(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: NotRequired[list[Any] | None]
    logprobs: NotRequired[list[Any] | None]


class Refusal(TypedDict):
    type: Literal["refusal"]
    refusal: str


class InputImage(TypedDict):
    type: Literal["input_image"]
    image_url: NotRequired[str | None]
    detail: NotRequired[Literal["auto", "low", "high"] | None]
    file_id: NotRequired[str | None]


class InputFile(TypedDict):
    type: Literal["input_file"]
    file_data: NotRequired[str | None]
    file_url: NotRequired[str | None]
    filename: NotRequired[str | None]
    file_id: NotRequired[str | None]


class SummaryText(TypedDict):
    type: Literal["summary_text"]
    text: str


UserPart = Annotated[InputText | InputImage | InputFile, Field(discriminator="type")]
AssistantPart = Annotated[OutputText | InputText | Refusal, Field(discriminator="type")]
ResultPart = Annotated[InputText | InputImage, Field(discriminator="type")]

# ---------------------------------------------------------------------------- input items


class SystemMessage(TypedDict):
    type: NotRequired[Literal["message"] | None]
    role: Literal["system", "developer"]
    content: str | list[InputText]


class UserMessage(TypedDict):
    type: NotRequired[Literal["message"] | None]
    role: Literal["user"]
    content: str | list[UserPart]


class AssistantMessage(TypedDict):
    type: NotRequired[Literal["message"] | None]
    role: Literal["assistant"]
    content: str | list[AssistantPart]
    id: NotRequired[str | None]
    status: NotRequired[str | None]
    phase: NotRequired[str | None]


class FunctionCall(TypedDict):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: NotRequired[str | None]
    id: NotRequired[str | None]
    status: NotRequired[str | None]


class FunctionCallOutput(TypedDict):
    type: Literal["function_call_output"]
    call_id: str
    output: NotRequired[str | list[ResultPart] | None]
    id: NotRequired[str | None]
    status: NotRequired[str | None]


class ReasoningItem(TypedDict):
    type: Literal["reasoning"]
    id: str
    summary: NotRequired[list[SummaryText] | None]
    encrypted_content: NotRequired[str | None]
    status: NotRequired[str | None]
    content: NotRequired[list[Any] | None]


_ITEMS = ("message", "function_call", "function_call_output", "reasoning")


def _item_type(item: Any) -> str:
    """An input item's tag: a message may leave its ``type`` out."""
    kind = item.get("type") if isinstance(item, dict) else None
    return "message" if kind is None else kind if isinstance(kind, str) else ""


Message = Annotated[SystemMessage | UserMessage | AssistantMessage, Field(discriminator="role")]
InputItem = Annotated[
    Annotated[Message, Tag("message")]
    | Annotated[FunctionCall, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(
        _item_type,
        custom_error_type="union_tag_invalid",
        custom_error_context={"discriminator": "'type'", "tag": "", "expected_tags": ", ".join(map(repr, _ITEMS))},
    ),
]

# ---------------------------------------------------------------------------- the request


class FunctionTool(TypedDict):
    type: Literal["function"]
    name: str
    description: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any] | None]
    strict: NotRequired[bool | None]


class ToolChoiceFunction(TypedDict):
    type: Literal["function"]
    name: str


class TextFormat(TypedDict):
    type: Literal["text"]


class JsonObjectFormat(TypedDict):
    type: Literal["json_object"]


class JsonSchemaFormat(TypedDict):
    type: Literal["json_schema"]
    schema: dict[str, Any]
    name: NotRequired[str | None]
    description: NotRequired[str | None]
    strict: NotRequired[bool | None]


class TextConfig(TypedDict):
    format: NotRequired[Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")] | None]


class ReasoningConfig(TypedDict):
    effort: NotRequired[Literal["minimal", "low", "medium", "high"] | None]
    summary: NotRequired[str | None]


class Request(TypedDict):
    model: str
    input: str | list[InputItem]
    instructions: NotRequired[str | None]
    tools: NotRequired[list[FunctionTool] | None]
    tool_choice: NotRequired[Literal["auto", "none", "required"] | ToolChoiceFunction | None]
    parallel_tool_calls: NotRequired[bool | None]
    text: NotRequired[TextConfig | None]
    max_output_tokens: NotRequired[Annotated[int, Field(ge=1)] | None]
    temperature: NotRequired[float | None]
    top_p: NotRequired[float | None]
    reasoning: NotRequired[ReasoningConfig | None]
    safety_identifier: NotRequired[str | None]
    user: NotRequired[str | None]
    store: NotRequired[bool | None]
    include: NotRequired[list[Literal["reasoning.encrypted_content"]] | None]
    stream: NotRequired[bool | None]


REQUEST = Shape(Request)

# ---------------------------------------------------------------------------- the reply


class OutputMessage(TypedDict):
    type: Literal["message"]
    id: str
    role: Literal["assistant"]
    status: str
    content: list[OutputText | Refusal]


class OutputCall(TypedDict):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: str


class OutputReasoning(TypedDict):
    type: Literal["reasoning"]
    id: str
    summary: list[SummaryText]
    encrypted_content: NotRequired[str | None]
    status: NotRequired[str]


OutputItem = OutputMessage | OutputCall | OutputReasoning


class Usage(TypedDict):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class Response(TypedDict):
    id: str
    object: Literal["response"]
    created_at: int
    status: str
    error: None
    incomplete_details: dict[str, str] | None
    instructions: None
    max_output_tokens: None
    model: str
    output: list[OutputItem]
    parallel_tool_calls: bool
    previous_response_id: None
    reasoning: None
    store: bool
    temperature: None
    text: dict[str, Any]
    tool_choice: str
    tools: list[Any]
    top_p: None
    truncation: str
    usage: Usage | None
    metadata: dict[str, str]
    sidecar: NotRequired[dict[str, Any]]


class Event(TypedDict, total=False):
    """A stream event's keys (its ``type`` and ``sequence_number`` are the writer's)."""

    response: Response
    item: OutputItem
    item_id: str
    output_index: int
    content_index: int
    summary_index: int
    part: OutputText | Refusal | SummaryText
    delta: str
    text: str
    refusal: str
    arguments: str
    name: str
    logprobs: list[Any]
    code: Any
    message: str
    param: Any
    sidecar: Any
    restart: dict[str, Any]
