"""Tools of MCP servers: listed at start, called through the one retry engine, judged by the taxonomy.

At start every server a ``kind: mcp`` tool names is opened (``tools.mcp_sessions``) and its tools
listed; the sidecar does not start without them (``McpUnavailable``: the server cannot be used;
``ConfigError``: it lists no such tool, or a schema the sidecar cannot run). A tool's definition
is the server's (name on the server, description unless the config gives one, ``input_schema``);
it is idempotent when the config says so, else when the server's annotations do
(``read_only_hint`` or ``idempotent_hint``), else not.

One ``tools/call`` is ``McpSender``, the Sender the engine runs behind the service's ``ServicePacer``
(the same throttle and circuit as an HTTP tool's), one attempt span each (``tools/call`` to the
server's endpoint; the attempt's ``traceparent`` goes in the request's ``_meta``). What it saw::

    a result                                     -> Done(its content as text: text blocks joined, else
                                                    the structured_content as JSON; images and other
                                                    blobs described, not inlined), cut at MAX_RESULT_CHARS
    a result with is_error                       -> Fail(INVALID_INPUT, correctable): the message is the
                                                    server's own text (masked), charged to no one
    JSON-RPC error -32602 (invalid params)       -> Fail(INVALID_INPUT): the rule quotes the server
    JSON-RPC error -32603 (internal error)       -> EXTERNAL_SERVICE, transient (re-sent when idempotent)
    any other JSON-RPC error, an answer the SDK  -> EXTERNAL_SERVICE, not re-sent
      refused (not its outputSchema)
    a transport fault: refused, reset, timeout,  -> EXTERNAL_SERVICE (core.tool_failures' words), transient:
      the stdio process gone, the session lost      re-sent when idempotent or when it certainly never
                                                    reached the server (refused, the session unknown to it)
    an HTTP status from the endpoint             -> 401/403/429 as core.tool_failures maps them (UNAUTHORIZED,
                                                    UPSTREAM_THROTTLE with Retry-After); any other
                                                    EXTERNAL_SERVICE, 5xx transient
    a timeout cut short by the caller's deadline -> Fail(JOB_TIMEOUT), charged to no one

EXTERNAL_SERVICE and UPSTREAM_THROTTLE are charged to the service's circuit, as for HTTP tools.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from typing import Any, cast

from jsonschema import Draft202012Validator
from mcp import types

from sidecar.config import Config, ConfigError, McpToolConfig
from sidecar.core import overhead
from sidecar.core.conversation import ToolResult
from sidecar.core.details import HttpInfo, InvalidInputDetail, ServiceDetail, Trigger
from sidecar.core.json_schemas import check_schema, validator_for
from sidecar.core.kinds import FailureKind, RetrySignal, TransportFault
from sidecar.core.observer import AttemptStart, Target
from sidecar.core.redact import redact_body
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.taxonomy import ExternalService, InvalidInput, JobTimeout, SidecarFailure
from sidecar.core.text import cap
from sidecar.core.tool_failures import Observation, classify, trigger_of
from sidecar.tools.catalog import ToolEntry
from sidecar.tools.guardrails import Guardrails
from sidecar.tools.http import MAX_RESULT_CHARS
from sidecar.tools.mcp_sessions import Answered, Broken, McpSession, McpUnavailable, RpcError, Seen, Unusable

__all__ = ["MCP_ERROR_CHARS", "MCP_METHOD", "McpSender", "McpTool", "McpTools", "result_text"]

MCP_METHOD = "tools/call"
"""The method of every MCP attempt (its span is ``tools/call {the server's tool name}``)."""
MCP_ERROR_CHARS = 4000
"""A tool's own error text (``is_error``) is kept up to this many characters for the model."""
_FAULT_TYPES: dict[TransportFault, str] = {
    TransportFault.TIMEOUT: "timeout",
    TransportFault.REFUSED: "connection_refused",
    TransportFault.RESET: "connection_reset",
    TransportFault.DNS: "dns",
}
_NOT_THE_CALLERS = frozenset({400, 404, 405, 406, 413, 415, 422})
"""Statuses of the MCP endpoint that say the exchange was wrong, not the arguments: EXTERNAL_SERVICE."""


@dataclass(slots=True)
class McpTool:
    """A tool of an MCP server as the sidecar serves it, its validator and guardrails compiled once."""

    name: str
    config: McpToolConfig
    remote: str
    """The server's name for it."""
    description: str
    parameters: dict[str, Any]
    validator: Draft202012Validator
    guardrails: Guardrails
    idempotent: bool
    timeout_s: float
    session: McpSession

    @property
    def service(self) -> str:
        return self.config.service

    def entry(self) -> ToolEntry:
        return ToolEntry(self.name, self.description, self.parameters, "mcp", self.service, self.idempotent)


class McpTools:
    """Every ``kind: mcp`` tool of the config, and one session per server they name."""

    def __init__(self, config: Config, secrets: tuple[str, ...]) -> None:
        self._config = config
        wanted = {t.server for t in config.mcp_tools.values()}
        self._sessions = {n: McpSession(n, s, secrets) for n, s in config.mcp_servers.items() if n in wanted}
        self._tools: dict[str, McpTool] = {}

    def get(self, name: str) -> McpTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    async def start(self) -> None:
        """Open every session and build each tool from its server's list (see the module docstring)."""
        names = list(self._sessions)
        listed = await asyncio.gather(*(self._sessions[n].start() for n in names), return_exceptions=True)
        problems = [r for r in listed if isinstance(r, BaseException)]
        tools = [r for r in listed if not isinstance(r, BaseException)]
        if problems:
            await self.aclose()
            unavailable = [p for p in problems if isinstance(p, McpUnavailable)]
            if len(unavailable) < len(problems):
                raise next(p for p in problems if not isinstance(p, McpUnavailable))
            raise McpUnavailable("; ".join(str(p) for p in unavailable))
        by_server = {n: {t.name: t for t in tools} for n, tools in zip(names, tools, strict=True)}
        try:
            for name, cfg in self._config.mcp_tools.items():
                self._tools[name] = self._tool(name, cfg, by_server[cfg.server])
        except ConfigError:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self._sessions.values()))

    def _tool(self, name: str, cfg: McpToolConfig, listed: dict[str, Any]) -> McpTool:
        remote = cfg.tool or name
        found = listed.get(remote)
        if not isinstance(found, types.Tool):
            names = ", ".join(sorted(listed)) or "none"
            key = "tool" if cfg.tool else "server"
            raise ConfigError(
                f"tools.{name}.{key}: the MCP server {cfg.server} lists no tool {remote!r} (it lists: {names})"
            )
        schema = dict(found.input_schema)
        problem = check_schema(schema)
        if problem is None and schema.get("type") != "object":
            problem = 'have "type": "object"'
        if problem is not None:
            raise ConfigError(f"tools.{name}: the inputSchema the MCP server {cfg.server} lists must {problem}")
        hints = found.annotations
        hinted = bool(hints and (hints.read_only_hint or hints.idempotent_hint))
        server = self._config.mcp_servers[cfg.server]
        return McpTool(
            name=name,
            config=cfg,
            remote=remote,
            description=cfg.description if cfg.description is not None else (found.description or ""),
            parameters=schema,
            validator=validator_for(schema),
            guardrails=Guardrails(cfg.guardrails),
            idempotent=cfg.idempotent if cfg.idempotent is not None else hinted,
            timeout_s=cfg.timeout_s or server.timeout_s,
            session=self._sessions[cfg.server],
        )


def result_text(result: types.CallToolResult) -> tuple[str, str]:
    """A result's content as text for the model, and its content type."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            what = "image" if isinstance(block, types.ImageContent) else "audio"
            parts.append(f"[{what} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}" + (f" ({block.name})" if block.name else "") + "]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                parts.append(res.text)
            else:
                parts.append(f"[resource {res.uri}, {res.mime_type or 'binary'}, not shown]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False), "application/json"
    return "\n".join(parts), "text/plain"


def trace_meta(headers: dict[str, str]) -> types.RequestParamsMeta:
    """The attempt's W3C trace context for ``params._meta`` (what MCP servers read it from)."""
    meta = {k: v for k, v in headers.items() if k in ("traceparent", "tracestate", "baggage")}
    return cast("types.RequestParamsMeta", meta)  # an open map (extra_items), which mypy does not read yet


class McpSender:
    """One attempt of one MCP tool call."""

    __slots__ = ("_arguments", "_arguments_json", "_secrets", "_tool", "reached")

    def __init__(self, tool: McpTool, arguments: dict[str, Any], arguments_json: str, secrets: tuple[str, ...]) -> None:
        self.reached = False
        """Whether a request of this call may have reached the server (``tools.once``)."""
        self._tool = tool
        self._arguments = arguments
        self._arguments_json = arguments_json
        self._secrets = secrets

    def describe(self, number: int) -> AttemptStart:
        session = self._tool.session
        service = self._tool.service
        return AttemptStart(
            Target.SERVICE,
            service,
            number,
            MCP_METHOD,
            session.endpoint,
            host=session.host,
            port=session.port,
            mcp_tool=self._tool.remote,
        )

    async def send(self, attempt: Attempt) -> Done[ToolResult] | Fail | Retry:
        tool = self._tool
        clipped = attempt.clipped(tool.timeout_s)
        meta = trace_meta(attempt.record.trace_headers())
        with overhead.upstream():
            seen = await tool.session.call(tool.remote, self._arguments, attempt.timeout(tool.timeout_s), meta)
        if not isinstance(seen, Broken) or seen.may_have_reached or seen.status is not None:
            self.reached = True
        if isinstance(seen, Broken) and clipped and seen.fault is TransportFault.TIMEOUT:
            return Fail(JobTimeout(f"tool {tool.name}", "the caller's deadline ended before the MCP server answered"))
        return self._judge(seen, attempt)

    def _judge(self, seen: Seen, attempt: Attempt) -> Done[ToolResult] | Fail | Retry:
        record = attempt.record
        if isinstance(seen, Answered) and not seen.result.is_error:
            content, ctype = result_text(seen.result)
            if len(content) > MAX_RESULT_CHARS:
                content = content[:MAX_RESULT_CHARS] + f"\n[result cut at {MAX_RESULT_CHARS} characters]"
            return Done(ToolResult(content=content, content_type=ctype, status_code=0, empty=not content.strip()))
        if isinstance(seen, Answered):
            record.failed("tool_error")
            return self._fail(self._tool_error(seen.result), record, answered=True)
        if isinstance(seen, RpcError):
            record.failed(str(seen.code))
            if seen.code == types.INVALID_PARAMS:
                rule = (
                    f"the MCP server {self._tool.config.server} refused them "
                    f"({cap(self._said(seen.message))}); send corrected arguments"
                )
                return self._fail(InvalidInput("arguments", self._arguments_json, rule), record, answered=True)
            detail = f"JSON-RPC error {seen.code}: {cap(self._said(seen.message))}"
            return self._service_failure(detail, attempt, transient=seen.code == types.INTERNAL_ERROR)
        if isinstance(seen, Unusable):
            record.failed("unusable_result")
            return self._service_failure(f"a result that could not be used ({seen.detail})", attempt, transient=False)
        return self._broken(seen, attempt)

    def _fail(self, failure: SidecarFailure, record: Any, *, answered: bool) -> Fail:
        record.failure_kind(failure.kind_name)
        return Fail(failure, answered=answered)

    def _said(self, text: str) -> str:
        return redact_body(text, None, self._secrets)

    def _tool_error(self, result: types.CallToolResult) -> SidecarFailure:
        """``is_error``: the server's own words for the model, a correctable INVALID_INPUT."""
        text = self._said(result_text(result)[0]).strip()
        if len(text) > MCP_ERROR_CHARS:
            text = text[: MCP_ERROR_CHARS - 1] + "…"
        tool = self._tool
        if not text:
            text = f"The {tool.name} tool reported an error and said nothing more; try other arguments or another way."
        detail = InvalidInputDetail(parameter="arguments", value=cap(self._arguments_json), rule=cap(text))
        return InvalidInput.worded(text, detail=detail)

    def _service_failure(self, detail: str, attempt: Attempt, *, transient: bool) -> Fail | Retry:
        """The server answered, with something no corrected call fixes."""
        tool = self._tool
        endpoint = tool.session.endpoint
        failure = ExternalService.worded(
            f"The {tool.service} service failed at {endpoint}: it answered {detail}.",
            detail=ServiceDetail(service=tool.service, endpoint=endpoint, detail=cap(detail)),
        )
        attempt.record.failure_kind(failure.kind_name)
        trigger = Trigger(None, cap(detail))
        if transient and tool.idempotent:
            attempt.record.retry_signal(RetrySignal.TRANSIENT)
            return Retry(RetrySignal.TRANSIENT, failure.message, failure=failure, trigger=trigger)
        return Fail(failure, trigger=trigger, answered=True)

    def _broken(self, seen: Broken, attempt: Attempt) -> Fail | Retry:
        tool = self._tool
        record = attempt.record
        endpoint = tool.session.endpoint
        base = Observation(service=tool.service, endpoint=endpoint, kind="fetch", idempotent=tool.idempotent)
        failure: SidecarFailure | None
        if seen.status is not None:
            record.answered(seen.status)
            record.failed(str(seen.status))
            obs = replace(base, status=seen.status, headers=seen.headers)
            mapped = seen.status not in _NOT_THE_CALLERS
            failure = classify(obs, (), self._secrets, attempt.clock.wall()) if mapped else None
            if failure is None:
                http = HttpInfo(status_code=seen.status, service=tool.service, endpoint=endpoint)
                failure = ExternalService(tool.service, endpoint, f"HTTP {seen.status}", http=http)
            transient = seen.status >= 500 or failure.kind is FailureKind.UPSTREAM_THROTTLE
        else:
            record.transport_fault(_FAULT_TYPES.get(seen.fault, "transport"), seen.detail)
            obs = replace(base, fault=seen.fault, fault_detail=seen.detail, may_have_reached=seen.may_have_reached)
            failure = classify(obs, (), self._secrets)
            assert failure is not None, "a transport fault is always a failure"
            transient = True
        record.failure_kind(failure.kind_name)
        trigger = trigger_of(obs, failure)
        signal = RetrySignal.RATE_LIMIT if failure.kind is FailureKind.UPSTREAM_THROTTLE else RetrySignal.TRANSIENT
        if transient:
            record.retry_signal(signal)
        if failure.retry_after is not None:
            record.asked_to_wait(failure.retry_after)
        if transient and (tool.idempotent or not seen.may_have_reached):
            return Retry(signal, failure.message, failure.retry_after, failure.http, failure=failure, trigger=trigger)
        return Fail(failure, trigger=trigger, answered=seen.status is not None)
