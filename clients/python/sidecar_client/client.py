"""Async and sync clients of the sidecar.

    async with AsyncSidecarClient("127.0.0.1:50051") as sc:
        outcome = await sc.execute_tool("search_docs", {"query": "retries"}, call_id="call_1")
        reply = await sc.call_model("local-gpt", [user("hello")])
        async for event in sc.stream_model("local-gpt", [user("hello")]):   # see streaming.py
            ...

    # a sidecar with server.tls (client_ca: mTLS) and server.auth
    tls = Tls.from_files(ca="ca.pem", cert="agent.pem", key="agent-key.pem")
    SidecarClient("sidecar.internal:50051", tls=tls, token=os.environ["SIDECAR_TOKEN"])

CallModel and StreamModel failures raise a ``SidecarError`` subclass per kind; ExecuteTool
failures are results.
``token`` goes with every call as ``authorization: Bearer <token>``; without TLS it crosses the
network in the clear, so use it alone only on a private network.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypedDict, Unpack

import grpc
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar_client.content import (
    Cache,
    DocumentSource,
    ImageSource,
    cache_breakpoint,
    document_parts,
    image_parts,
    text_part,
)
from sidecar_client.errors import from_rpc_error
from sidecar_client.overflow import Overflow, Strategy, overflow_policy
from sidecar_client.streaming import AsyncModelStream, ModelStream

__all__ = [
    "AsyncSidecarClient",
    "Effort",
    "ModelOptions",
    "SidecarClient",
    "Tls",
    "assistant",
    "job",
    "model_request",
    "provider_options",
    "reasoning",
    "tool_choice",
    "tool_result",
    "tool_results",
    "user",
]

DEFAULT_TARGET = "127.0.0.1:50051"

try:  # when the agent uses OpenTelemetry, its current trace continues in the sidecar
    from opentelemetry import propagate as _propagate
except ImportError:  # pragma: no cover - the client does not require it
    _propagate = None  # type: ignore[assignment]


def _call_metadata(auth: tuple[tuple[str, str], ...] = ()) -> tuple[tuple[str, str], ...] | None:
    """W3C ``traceparent`` (and baggage) of the caller's current span, as gRPC metadata, after ``auth``."""
    if _propagate is None:
        return auth or None
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return (*auth, *carrier.items()) or None


@dataclass(frozen=True)
class Tls:
    """TLS to the sidecar, in PEM bytes.

    ``ca``: the CA that signed the sidecar's certificate (None: the system's trusted roots);
    ``cert`` and ``key``: this client's certificate and key, for a sidecar with ``server.tls.client_ca``
    (mTLS); ``server_name``: the name to verify in the sidecar's certificate when the target's differs.
    """

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("Tls: a client certificate needs its key, and a key its certificate")

    @classmethod
    def from_files(
        cls,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        server_name: str | None = None,
    ) -> Tls:
        def read(path: str | Path | None) -> bytes | None:
            return None if path is None else Path(path).read_bytes()

        return cls(read(ca), read(cert), read(key), server_name)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )

    def options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def _tls(tls: Tls | bool, channel: object) -> Tls | None:
    if tls and channel is not None:
        raise ValueError("tls applies to the channel the client opens: pass tls or channel, not both")
    if tls is True:
        return Tls()
    return tls or None


def _auth(token: str | None) -> tuple[tuple[str, str], ...]:
    if token is None:
        return ()
    if not token or token != token.strip() or "\n" in token:
        raise ValueError("token must be a non-empty string without surrounding spaces or newlines")
    return (("authorization", f"Bearer {token}"),)


def user(
    text: str = "",
    *,
    image: ImageSource | Sequence[ImageSource] | None = None,
    document: DocumentSource | Sequence[DocumentSource] | None = None,
    parts: Sequence[pb.Part] = (),
    cache: Cache | None = None,
) -> pb.Message:
    """A user turn: ``text`` alone, or ordered parts (content.py says what each source may be).

    With images, documents or parts the message carries parts, in the order documents, images,
    ``parts``, then ``text`` (media before the question about it, as the providers advise);
    ``cache`` makes its last part a cache breakpoint.
    """
    content = [*document_parts(document), *image_parts(image), *parts]
    breakpoint = None if cache is None else cache_breakpoint(cache)
    if not content and breakpoint is None:
        return pb.Message(role=pb.ROLE_USER, text=text)
    if text:
        content.append(text_part(text))
    if breakpoint is not None and content:
        last = pb.Part()
        last.CopyFrom(content[-1])
        last.cache.CopyFrom(breakpoint)
        content[-1] = last
    return pb.Message(role=pb.ROLE_USER, parts=content)


def assistant(reply: pb.Message | pb.CallModelResponse) -> pb.Message:
    """The model's reply (a CallModelResponse or its message), ready to append to the conversation.

    Its reasoning goes back exactly as it came (byte-identical: the provider verifies its signature),
    with its text and tool calls.
    """
    message = reply.message if isinstance(reply, pb.CallModelResponse) else reply
    return pb.Message(
        role=pb.ROLE_ASSISTANT,
        text=message.text,
        tool_calls=message.tool_calls,
        parts=message.parts,
        reasoning=message.reasoning,
    )


def tool_result(
    call: pb.ToolCall,
    content: str | pb.ExecuteToolResponse,
    *,
    image: ImageSource | Sequence[ImageSource] | None = None,
    is_error: bool | None = None,
) -> pb.ToolCallResult:
    """One tool outcome for the model: an ExecuteTool answer (``model_text``; ``is_error`` on a failure)
    or the agent's own tool's text, with images when it has them (the result then carries parts: the
    text, then the images)."""
    if isinstance(content, pb.ExecuteToolResponse):
        failed = content.HasField("failure")
        content = content.model_text
    else:
        failed = False
    result = pb.ToolCallResult(call_id=call.id, name=call.name, is_error=failed if is_error is None else is_error)
    images = image_parts(image)
    if images:
        result.parts.extend([text_part(content)] if content else [])
        result.parts.extend(images)
    else:
        result.content = content
    return result


def tool_results(
    outcomes: Iterable[tuple[pb.ToolCall, pb.ExecuteToolResponse] | pb.ToolCallResult],
) -> pb.Message:
    """One message handing every tool outcome back to the model (``is_error`` on failures): each a
    ``(call, ExecuteTool answer)`` pair or a ``tool_result(...)``."""
    results = [o if isinstance(o, pb.ToolCallResult) else tool_result(o[0], o[1]) for o in outcomes]
    return pb.Message(role=pb.ROLE_TOOL, tool_results=results)


def job(job_id: str = "", workflow_id: str = "", upstream_retries: int | None = None, **attributes: str) -> pb.Job:
    j = pb.Job(job_id=job_id, workflow_id=workflow_id, attributes=attributes)
    if upstream_retries is not None:
        j.upstream_retries = upstream_retries
    return j


def _arguments(arguments: str | Mapping[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _tools(tools: Sequence[pb.ToolDefinition | pb.ToolInfo] | None) -> list[pb.ToolDefinition]:
    return [t.definition if isinstance(t, pb.ToolInfo) else t for t in tools or []]


Effort: TypeAlias = Literal["minimal", "low", "medium", "high"]
EFFORTS: dict[str, pb.ReasoningEffort] = {
    "minimal": pb.REASONING_EFFORT_MINIMAL,
    "low": pb.REASONING_EFFORT_LOW,
    "medium": pb.REASONING_EFFORT_MEDIUM,
    "high": pb.REASONING_EFFORT_HIGH,
}
TOOL_CHOICE_MODES: dict[str, pb.ToolChoiceMode] = {
    "auto": pb.TOOL_CHOICE_MODE_AUTO,
    "none": pb.TOOL_CHOICE_MODE_NONE,
    "required": pb.TOOL_CHOICE_MODE_REQUIRED,
}


class ModelOptions(TypedDict, total=False):
    """What a model call may set beside the model and the messages (CallModelRequest's fields).

    ``reasoning``: an effort (``"minimal"`` ... ``"high"``) or a token budget (an int);
    ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or the name of one of the tools;
    ``stop``: one sequence or several; ``system_cache``: the system prompt is a cache breakpoint
    (``True``, ``"5m"``, ``"1h"``); ``provider_options``: ``{"<wire format>": {...}}`` merged into
    the upstream body (a dict, sent as JSON, or the JSON text); ``on_overflow``: what a conversation
    that does not fit the model's window does, ``"fail"``, ``"compact"`` (the model's strategies) or
    the strategies to compact with, in order (``["tool_results", "summarize"]``; ``overflow_policy``).
    None leaves an option unset.
    """

    system: str
    tools: Sequence[pb.ToolDefinition | pb.ToolInfo] | None
    response_schema: Mapping[str, Any] | None
    max_output_tokens: int | None
    temperature: float | None
    job: pb.Job | None
    mid_stream: pb.MidStreamPolicy | None
    reasoning: Effort | int | pb.Reasoning | None
    tool_choice: str | pb.ToolChoice | None
    parallel_tool_calls: bool | None
    stop: str | Sequence[str] | None
    top_p: float | None
    top_k: int | None
    seed: int | None
    presence_penalty: float | None
    frequency_penalty: float | None
    end_user: str | None
    system_cache: Cache | None
    provider_options: Mapping[str, Any] | str | None
    on_overflow: Overflow | Sequence[Strategy] | pb.OverflowPolicy | None


_OPTION_NAMES = ModelOptions.__optional_keys__
_SCALARS = ("parallel_tool_calls", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty", "end_user")


def reasoning(amount: Effort | int | pb.Reasoning) -> pb.Reasoning:
    """An effort level or a token budget as the request's ``reasoning``."""
    if isinstance(amount, pb.Reasoning):
        return amount
    if isinstance(amount, str):
        if amount not in EFFORTS:
            raise ValueError(f"reasoning is one of {', '.join(EFFORTS)} or a token budget, not {amount!r}")
        return pb.Reasoning(effort=EFFORTS[amount])
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError(f"reasoning is an effort (a str) or a token budget (an int), not {amount!r}")
    return pb.Reasoning(budget_tokens=amount)


def tool_choice(choice: str | pb.ToolChoice) -> pb.ToolChoice:
    """``"auto"``, ``"none"``, ``"required"``, or a tool's name (that tool must be called)."""
    if isinstance(choice, pb.ToolChoice):
        return choice
    if not choice:
        raise ValueError("tool_choice is 'auto', 'none', 'required' or a tool's name, not ''")
    if choice in TOOL_CHOICE_MODES:
        return pb.ToolChoice(mode=TOOL_CHOICE_MODES[choice])
    return pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name=choice)


def provider_options(options: Mapping[str, Any] | str) -> str:
    """The request's ``provider_options_json``: a dict as compact JSON, JSON text as it is."""
    return options if isinstance(options, str) else json.dumps(options, separators=(",", ":"), ensure_ascii=False)


def model_request(model: str, messages: Sequence[pb.Message], **options: Unpack[ModelOptions]) -> pb.CallModelRequest:
    """The CallModelRequest ``call_model`` and ``stream_model`` send; a misspelt option is a TypeError."""
    if unknown := sorted(set(options) - _OPTION_NAMES):
        raise TypeError(f"a model call takes no {', '.join(unknown)} (it takes {', '.join(sorted(_OPTION_NAMES))})")
    req = pb.CallModelRequest(
        model=model, system=options.get("system", ""), messages=messages, tools=_tools(options.get("tools"))
    )
    if (mid_stream := options.get("mid_stream")) is not None:
        req.mid_stream = mid_stream
    if (schema := options.get("response_schema")) is not None:
        req.response_schema_json = json.dumps(schema)
    if (max_output_tokens := options.get("max_output_tokens")) is not None:
        req.max_output_tokens = max_output_tokens
    if (temperature := options.get("temperature")) is not None:
        req.temperature = temperature
    if (job_ := options.get("job")) is not None:
        req.job.CopyFrom(job_)
    if (amount := options.get("reasoning")) is not None:
        req.reasoning.CopyFrom(reasoning(amount))
    if (choice := options.get("tool_choice")) is not None:
        req.tool_choice.CopyFrom(tool_choice(choice))
    if (stop := options.get("stop")) is not None:
        req.stop.extend([stop] if isinstance(stop, str) else stop)
    for name in _SCALARS:
        if (value := options.get(name)) is not None:
            setattr(req, name, value)
    if (cache := options.get("system_cache")) is not None and (breakpoint := cache_breakpoint(cache)) is not None:
        req.system_cache.CopyFrom(breakpoint)
    if (extra := options.get("provider_options")) is not None:
        req.provider_options_json = provider_options(extra)
    if (policy := options.get("on_overflow")) is not None:
        req.on_overflow.CopyFrom(overflow_policy(policy))
    return req


class AsyncSidecarClient:
    """The asyncio client. ``tls``: ``True`` (the system's roots) or a ``Tls``; ``token``: a bearer token."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        channel: grpc.aio.Channel | None = None,
        tls: Tls | bool = False,
        token: str | None = None,
    ) -> None:
        secure = _tls(tls, channel)
        if channel is None:
            channel = (
                grpc.aio.secure_channel(target, secure.credentials(), options=secure.options())
                if secure is not None
                else grpc.aio.insecure_channel(target)
            )
        self._channel = channel
        self._auth = _auth(token)
        self._stub = pb_grpc.SidecarStub(self._channel)

    async def __aenter__(self) -> AsyncSidecarClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def execute_tool(
        self,
        tool: str,
        arguments: str | Mapping[str, Any],
        *,
        call_id: str = "",
        job: pb.Job | None = None,
        timeout: float | None = None,
    ) -> pb.ExecuteToolResponse:
        req = pb.ExecuteToolRequest(tool=tool, arguments_json=_arguments(arguments), call_id=call_id, job=job)
        return await self._stub.ExecuteTool(req, timeout=timeout, metadata=_call_metadata(self._auth))

    async def call_model(
        self,
        model: str,
        messages: Sequence[pb.Message],
        *,
        timeout: float | None = None,
        **options: Unpack[ModelOptions],
    ) -> pb.CallModelResponse:
        """The reply; a SidecarError subclass (by kind) when no reply can be produced."""
        try:
            return await self._stub.CallModel(
                model_request(model, messages, **options), timeout=timeout, metadata=_call_metadata(self._auth)
            )
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc

    def stream_model(
        self,
        model: str,
        messages: Sequence[pb.Message],
        *,
        timeout: float | None = None,
        **options: Unpack[ModelOptions],
    ) -> AsyncModelStream:
        """The reply as it is written: ``async for event in ...``, or ``await ....collect()``.

        Takes what ``call_model`` takes, and ``mid_stream`` (``pb.MID_STREAM_POLICY_RESTART`` /
        ``_FAIL`` / ``_CONTINUE``). A ``restart`` event voids what came before it; a ``continued``
        event keeps it (the deltas that follow continue it); a failure raises what ``call_model``
        would, after the events sent before it.
        """
        request = model_request(model, messages, **options)
        return AsyncModelStream(self._stub.StreamModel(request, timeout=timeout, metadata=_call_metadata(self._auth)))

    async def classify_failure(self, request: pb.ClassifyFailureRequest, *, timeout: float | None = None) -> pb.Failure:
        return await self._stub.ClassifyFailure(request, timeout=timeout, metadata=_call_metadata(self._auth))

    async def list_tools(self) -> list[pb.ToolInfo]:
        return list((await self._stub.ListTools(pb.ListToolsRequest(), metadata=_call_metadata(self._auth))).tools)

    async def list_models(self) -> list[pb.ModelInfo]:
        return list((await self._stub.ListModels(pb.ListModelsRequest(), metadata=_call_metadata(self._auth))).models)


class SidecarClient:
    """The blocking client: the same calls, without asyncio (and the same ``tls`` and ``token``)."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        channel: grpc.Channel | None = None,
        tls: Tls | bool = False,
        token: str | None = None,
    ) -> None:
        secure = _tls(tls, channel)
        if channel is None:
            channel = (
                grpc.secure_channel(target, secure.credentials(), options=secure.options())
                if secure is not None
                else grpc.insecure_channel(target)
            )
        self._channel = channel
        self._auth = _auth(token)
        self._stub = pb_grpc.SidecarStub(self._channel)

    def __enter__(self) -> SidecarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def execute_tool(
        self,
        tool: str,
        arguments: str | Mapping[str, Any],
        *,
        call_id: str = "",
        job: pb.Job | None = None,
        timeout: float | None = None,
    ) -> pb.ExecuteToolResponse:
        req = pb.ExecuteToolRequest(tool=tool, arguments_json=_arguments(arguments), call_id=call_id, job=job)
        return self._stub.ExecuteTool(req, timeout=timeout, metadata=_call_metadata(self._auth))

    def call_model(
        self,
        model: str,
        messages: Sequence[pb.Message],
        *,
        timeout: float | None = None,
        **options: Unpack[ModelOptions],
    ) -> pb.CallModelResponse:
        try:
            return self._stub.CallModel(
                model_request(model, messages, **options), timeout=timeout, metadata=_call_metadata(self._auth)
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc

    def stream_model(
        self,
        model: str,
        messages: Sequence[pb.Message],
        *,
        timeout: float | None = None,
        **options: Unpack[ModelOptions],
    ) -> ModelStream:
        """The reply as it is written: ``for event in ...``, or ``....collect()`` (see AsyncSidecarClient)."""
        request = model_request(model, messages, **options)
        return ModelStream(self._stub.StreamModel(request, timeout=timeout, metadata=_call_metadata(self._auth)))

    def classify_failure(self, request: pb.ClassifyFailureRequest, *, timeout: float | None = None) -> pb.Failure:
        return self._stub.ClassifyFailure(request, timeout=timeout, metadata=_call_metadata(self._auth))

    def list_tools(self) -> list[pb.ToolInfo]:
        return list(self._stub.ListTools(pb.ListToolsRequest(), metadata=_call_metadata(self._auth)).tools)

    def list_models(self) -> list[pb.ModelInfo]:
        return list(self._stub.ListModels(pb.ListModelsRequest(), metadata=_call_metadata(self._auth)).models)
