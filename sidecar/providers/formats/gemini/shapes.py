"""The Gemini request and reply as types: the REST ``generateContent`` body as ``google-genai`` 3.3.0 types it.

Each ``TypedDict`` follows the SDK's model of that name (``google.genai.types``, compared by their camelCase
aliases in ``tests/formats/test_gemini_shapes.py``), keeping only the keys the sidecar interprets; the
sidecar never imports the SDK. A request is read after ``front.camel`` (snake_case keys in camelCase)::

    Request             the REST body: InlinedRequest's model and contents, GenerateContentConfig's
                        systemInstruction, tools and toolConfig, a GenerationConfig; ``stream`` the URL's
    Content, Part       Content, Part (Blob, FileData, FunctionCall, FunctionResponse)
    System              systemInstruction: a Content of text parts
    Tool                Tool, FunctionDeclaration
    ToolConfig          ToolConfig, FunctionCallingConfig
    GenerationConfig    GenerationConfig, ThinkingConfig
    Response            GenerateContentResponse, Candidate, GenerateContentResponseUsageMetadata,
                        GenerateContentResponsePromptFeedback, SafetyRating: what ``render`` and the
                        stream writer write and ``replies`` reads (tolerantly: a key of another type
                        there is skipped, not refused)
    ErrorBody           Google's error body ``{"error": {"code", "message", "status", "details"}}``

The format has no door, so its request is closed (``extra="forbid"``, at every depth): a key its shapes
do not declare is refused by name, not carried (nothing is accepted and then dropped).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from sidecar.providers.formats.shapes import Shape

__all__ = ["REQUEST", "Content", "ErrorBody", "FunctionCall", "Part", "Request", "Response", "UsageMetadata"]


class Blob(TypedDict):
    mimeType: str
    data: str


class FileData(TypedDict):
    mimeType: NotRequired[str | None]
    fileUri: str


class FunctionCall(TypedDict):
    id: NotRequired[str | None]
    name: str
    args: NotRequired[dict[str, Any] | None]


class FunctionResponse(TypedDict):
    id: NotRequired[str | None]
    name: str
    response: NotRequired[dict[str, Any] | None]


class Part(TypedDict, total=False):
    text: str | None
    thought: bool | None
    thoughtSignature: str | None
    inlineData: Blob | None
    fileData: FileData | None
    functionCall: FunctionCall | None
    functionResponse: FunctionResponse | None


class Content(TypedDict):
    role: NotRequired[Literal["user", "model", ""] | None]
    parts: list[Part]


class SystemPart(TypedDict):
    text: str


class System(TypedDict):
    role: NotRequired[str | None]
    parts: list[SystemPart]


class FunctionDeclaration(TypedDict):
    name: str
    description: NotRequired[str | None]
    parametersJsonSchema: NotRequired[dict[str, Any] | None]


class Tool(TypedDict, total=False):
    functionDeclarations: list[FunctionDeclaration] | None


class FunctionCallingConfig(TypedDict):
    mode: Literal["AUTO", "NONE", "ANY"]
    allowedFunctionNames: NotRequired[list[str] | None]


class ToolConfig(TypedDict):
    functionCallingConfig: FunctionCallingConfig


class ThinkingConfig(TypedDict, total=False):
    thinkingBudget: int | None
    thinkingLevel: str | None
    includeThoughts: bool | None


class GenerationConfig(TypedDict, total=False):
    maxOutputTokens: int | None
    temperature: float | None
    topP: float | None
    topK: float | None
    stopSequences: list[str] | None
    seed: int | None
    presencePenalty: float | None
    frequencyPenalty: float | None
    responseMimeType: Literal["text/plain", "application/json"] | None
    responseJsonSchema: dict[str, Any] | None
    thinkingConfig: ThinkingConfig | None


@with_config(ConfigDict(extra="forbid"))  # pydantic carries it to the TypedDicts inside
class Request(TypedDict):
    model: Annotated[str, Field(min_length=1)]
    stream: NotRequired[bool | None]
    contents: list[Content]
    systemInstruction: NotRequired[System | None]
    tools: NotRequired[list[Tool] | None]
    toolConfig: NotRequired[ToolConfig | None]
    generationConfig: NotRequired[GenerationConfig | None]


REQUEST = Shape(Request)


# ---------------------------------------------------------------------------- a reply (written, and read back)


class SafetyRating(TypedDict):
    category: str
    blocked: NotRequired[bool]


class ReplyContent(TypedDict):
    role: Literal["model"]
    parts: list[Part]


class Candidate(TypedDict):
    content: NotRequired[ReplyContent]
    finishReason: NotRequired[str]
    finishMessage: NotRequired[str]
    safetyRatings: NotRequired[list[SafetyRating]]
    index: int


class UsageMetadata(TypedDict):
    promptTokenCount: int
    candidatesTokenCount: int
    totalTokenCount: int
    cachedContentTokenCount: NotRequired[int]
    thoughtsTokenCount: NotRequired[int]
    toolUsePromptTokenCount: NotRequired[int]


class PromptFeedback(TypedDict):
    blockReason: str
    blockReasonMessage: NotRequired[str]
    safetyRatings: NotRequired[list[SafetyRating]]


class Response(TypedDict):
    candidates: list[Candidate]
    usageMetadata: NotRequired[UsageMetadata]
    promptFeedback: NotRequired[PromptFeedback]
    modelVersion: str
    responseId: str
    sidecar: NotRequired[dict[str, Any]]


class Error(TypedDict):
    code: int
    message: str
    status: str
    details: NotRequired[list[dict[str, Any]]]
    sidecar: NotRequired[dict[str, Any]]


class ErrorBody(TypedDict):
    error: Error
