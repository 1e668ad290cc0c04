"""A tool call, whole: the tool, its arguments, its guardrails, then attempts behind its service's circuit.

    unknown tool / budget override too large / arguments that break the schema   -> INVALID_INPUT
    a guardrail's rule broken                                                    -> GUARDRAIL
    run_attempts (the one retry engine: the service's circuit and throttle, the tool window
                  uniform(tool_window) x min(attempt, 10) capped at tool_max_wait_s, or the service's
                  Retry-After; never past the caller's deadline)
    giving up                                                                    -> the last failure, as it is

A tool's failure is a result for the model: ``execute`` never raises for one, it returns a
ToolOutcome whose ``model_text`` is what the model reads. A non-idempotent tool is re-sent only
when the request certainly never reached the service (refused, DNS, no connection in time); a
tool with an ``idempotency_header`` sends one key on every attempt, and is retried as an
idempotent one.

Once the checks pass, a call with a job id and a call id goes through ``tools.once``: a re-send
within the tool's dedupe window gets the recorded outcome, or waits for the call in flight,
instead of being sent again (the record in the state backend: shared with Redis).

An HTTP tool's attempt is ``tools.http.ToolSender``; a tool of an MCP server (``kind: mcp``) is
``tools.mcp.McpSender``, its arguments checked against the schema its server listed, behind the
same pacer, engine and give-up. ``start`` opens the MCP servers' sessions and lists their tools;
``catalog`` is every tool as every door lists it. The MCP SDK (``tools.mcp``) is imported only when a
``kind: mcp`` tool is configured: it is a quarter of the process's import time.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from sidecar.config import Config
from sidecar.core import overhead
from sidecar.core.clock import Clock
from sidecar.core.conversation import (
    EMPTY_RESULT_TEXT,
    EMPTY_SEARCH_TEXT,
    CallOptions,
    ToolOutcome,
    ToolRequest,
    ToolResult,
    Usage,
)
from sidecar.core.draining import CallCount
from sidecar.core.failure_log import FailureLog
from sidecar.core.observer import Observer, OverheadMeasured, ToolCallStart
from sidecar.core.retry import MAX_UPSTREAM_RETRIES, Retry, RetryPolicy, Tally, run_attempts
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.settings import Windows
from sidecar.core.state import MEMORY, CallRecords, StateBackend
from sidecar.core.taxonomy import (
    Guardrail,
    InvalidInput,
    JobCancelled,
    SidecarFailure,
    SystemFailure,
    as_failure,
)
from sidecar.core.text import endpoint_of
from sidecar.net.backend import fast_transport
from sidecar.net.cookies import NoCookies
from sidecar.tools.arguments import check_call, validator_for
from sidecar.tools.catalog import ToolEntry
from sidecar.tools.guardrails import Guardrails
from sidecar.tools.http import Tool, ToolSender, build_request
from sidecar.tools.once import Once, OnceCall, Reaching, Watched, call_hash, idempotency_key
from sidecar.tools.pacing import ServicePacer

if TYPE_CHECKING:
    from sidecar.tools.mcp import McpTool, McpTools

__all__ = ["TOOL_CLIENT_LIMITS", "ToolService"]

TOOL_CLIENT_LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)
"""The one HTTP client every tool shares."""
LONGEST_MARGIN_S = 60.0
"""Added to the longest a call may take by its timeouts and retries, for the waits of its throttle."""


@dataclass(frozen=True, slots=True)
class _GiveUp:
    """A tool that stops retrying reports its last failure as it is."""

    def exhausted(self, retry: Retry, tally: Tally) -> SidecarFailure:
        return _last(retry)

    def too_long(self, retry: Retry, max_wait_s: float) -> SidecarFailure:
        return _last(retry)  # asked for longer than a tool call may wait

    def past_deadline(self, retry: Retry, wait_s: float, left_s: float) -> SidecarFailure:
        return _last(retry)


@dataclass(slots=True)
class _Replay:
    """Whether the call was answered from its record (it sent nothing: no attempts to count)."""

    replayed: bool = False


def _mcp_tools(config: Config, secrets: tuple[str, ...]) -> McpTools | None:
    """The ``kind: mcp`` tools of ``config`` and their servers' sessions; None (no MCP SDK loaded) without one."""
    if not config.mcp_tools:
        return None
    from sidecar.tools.mcp import McpTools

    return McpTools(config, secrets)


def _last(retry: Retry) -> SidecarFailure:
    assert retry.failure is not None, "a tool's retry signal always carries its failure"
    return retry.failure


class ToolService:
    """Every configured tool, sharing one HTTP client and the service guards.

    Built again for each config a reload applies, from the one before (``carry``): the record of
    tool calls (``tools.once``) is the same, so a re-send after a reload still gets its outcome.
    The calls in flight on the old service finish there (``calls``); new calls go to the new one.
    """

    def __init__(
        self,
        config: Config,
        clock: Clock,
        guards: ServiceGuards,
        observer: Observer,
        *,
        embedded: dict[str, str] | None = None,
        rng: random.Random | None = None,
        state: StateBackend = MEMORY,
        carry: ToolService | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self.failures: FailureLog = carry.failures if carry is not None else FailureLog(clock)
        """The failed calls' log lines, each kind's bounded (the same object across reloads)."""
        self._guards = guards
        self.calls = CallCount()
        """The calls in flight on this service (a reload waits for them before closing it)."""
        self._observer = observer
        self._embedded = embedded or {}
        self._rng = rng or random.Random()
        self._secrets = config.secrets
        policy = config.policy
        window = policy.tool_window
        windows = Windows(rate_limit=window, overload=window, transient=window, max_wait_s=policy.tool_max_wait_s)
        self._policy = RetryPolicy(windows, _GiveUp(), self._rng)
        self._tools = {
            name: Tool(name, tool, validator_for(tool.parameters), Guardrails(tool.guardrails))
            for name, tool in config.http_tools.items()
        }
        self._mcp = _mcp_tools(config, self._secrets)
        self._once: Once = (
            carry._once
            if carry is not None
            else Once(clock, state if isinstance(state, CallRecords) else None, self._secrets)
        )
        self._owns_once = carry is None
        """Whether ``aclose`` closes the record: a reload hands it to the next service once that one
        serves (``settle``), so a reload refused after this was built leaves the record open."""
        self._handed_by = carry
        self._transport = fast_transport(TOOL_CLIENT_LIMITS)
        self._client = httpx.AsyncClient(  # builds each request; attempts go on the transport (AiohttpTransport.send)
            transport=self._transport, follow_redirects=False, cookies=NoCookies(), trust_env=False
        )

    def settle(self) -> None:
        """This service serves from now on: the record of tool calls is its own to close."""
        if self._handed_by is not None:
            self._handed_by._owns_once, self._owns_once, self._handed_by = False, True, None

    async def start(self) -> None:
        """Open every MCP server's session and list its tools (``McpUnavailable``, ``ConfigError``)."""
        if self._mcp is not None:
            await self._mcp.start()

    async def aclose(self) -> None:
        if self._owns_once:
            await self._once.aclose()
        await self._client.aclose()
        if self._mcp is not None:
            await self._mcp.aclose()

    def catalog(self) -> tuple[ToolEntry, ...]:
        """Every configured tool, in the config's order, as ListTools and the MCP front list it."""
        entries = []
        for name in self._config.tools:
            tool, mcp = self._tools.get(name), self._mcp_tool(name)
            if tool is not None:
                c = tool.config
                entries.append(ToolEntry(name, c.description, c.parameters, c.kind, c.service, c.is_idempotent))
            elif mcp is not None:
                entries.append(mcp.entry())
        return tuple(entries)

    def _mcp_tool(self, name: str) -> McpTool | None:
        return self._mcp.get(name) if self._mcp is not None else None

    def resolve(self, url: str) -> str:
        """A tool URL with the embedded fakes' addresses filled in."""
        for name, base in self._embedded.items():
            prefix = f"embedded://{name}"
            if url.startswith(prefix):
                return base.rstrip("/") + url[len(prefix) :]
        return url

    async def execute(self, request: ToolRequest, options: CallOptions) -> ToolOutcome:
        """The tool call's outcome: a result, or a failure for the model to read (never raised)."""
        tool = self._tools.get(request.tool)
        mcp = self._mcp_tool(request.tool)
        start = ToolCallStart(
            request.tool,
            known=tool is not None or mcp is not None,
            description=tool.config.description if tool else (mcp.description if mcp else ""),
            service=tool.config.service if tool else (mcp.service if mcp else ""),
            call_id=request.call_id,
            job=request.job,
            arguments_json=request.arguments_json,
        )
        with overhead.joined() as watch:
            event, name, known = self._observer.event, request.tool, start.known
            watch.at_end(lambda seconds: event(OverheadMeasured("execute_tool", name, known, watch.door, seconds)))
            return await self._recorded(tool, mcp, request, options, start)

    async def _recorded(
        self, tool: Tool | None, mcp: McpTool | None, request: ToolRequest, options: CallOptions, start: ToolCallStart
    ) -> ToolOutcome:
        replay = _Replay()
        with self.calls, self._observer.tool_call(start) as record:
            try:
                outcome = await self._execute(tool, mcp, request, options, replay)
            except asyncio.CancelledError as exc:
                cancelled = JobCancelled(f"tool {request.tool}", by_shutdown=JobCancelled.cut(exc))
                self.failures.failed(cancelled, tool=request.tool)
                record.failed(cancelled)
                raise
            except Exception as exc:  # the one boundary: anything not of the taxonomy is SYSTEM (logged there)
                outcome = ToolOutcome(None, as_failure(exc, "the tool runner"), 0)
            record.tally(0 if replay.replayed else outcome.attempts, 0, Usage())  # a replay sent nothing
            if outcome.failure is not None and not isinstance(outcome.failure, SystemFailure):
                self.failures.failed(outcome.failure, tool=request.tool, call_id=request.call_id)
            record.tool_finished(outcome)
            return outcome

    async def _execute(
        self, tool: Tool | None, mcp: McpTool | None, request: ToolRequest, options: CallOptions, replay: _Replay
    ) -> ToolOutcome:
        if tool is None and mcp is None:
            mcps = self._mcp.names() if self._mcp is not None else []
            known = ", ".join(sorted([*self._tools, *mcps])) or "none are configured"
            return ToolOutcome(None, InvalidInput("tool", request.tool, f"must name a tool that exists: {known}"), 0)
        retries = options.upstream_retries
        if retries is not None and retries > MAX_UPSTREAM_RETRIES:
            failure = InvalidInput("job.upstream_retries", str(retries), f"must be at most {MAX_UPSTREAM_RETRIES}")
            return ToolOutcome(None, failure, 0)
        if mcp is not None:
            return await self._execute_mcp(mcp, request, options, replay)
        assert tool is not None
        empty = EMPTY_SEARCH_TEXT if tool.config.kind == "search" else EMPTY_RESULT_TEXT
        cfg = tool.config
        policy = self._config.policy
        try:
            arguments = await check_call(  # bounded: size, depth, time; large ones off the event loop
                request.arguments_json,
                cfg.parameters,
                tool.validator,
                tool.guardrails,
                url=cfg.url,
                max_bytes=policy.max_argument_bytes,
                limit_s=policy.check_time_limit_s,
            )
            built = build_request(self._client, tool, arguments, self.resolve(cfg.url))
        except (InvalidInput, Guardrail) as failure:
            return ToolOutcome(None, failure, 0, empty)
        key = call_hash(request.job.job_id, request.call_id, tool.name, arguments)
        if cfg.idempotency_header is not None:  # one key, every attempt, and the agent's re-send
            built.headers[cfg.idempotency_header] = idempotency_key(key, self._rng)
        id_param = cfg.identifier_parameter
        sender = ToolSender(
            tool,
            self._transport,
            built,
            value=str(arguments.get(id_param, "")) if id_param else "",
            quirks=self._config.service(cfg.service).quirks,
            secrets=self._secrets,
            now=self._clock.wall,
        )
        retries = self._config.tool_retries(options.upstream_retries)
        once = OnceCall(
            key=key,
            window_s=self._window(cfg.dedupe_window_s),
            longest_s=self._longest(retries, cfg.timeout_s + cfg.connect_timeout_s, options),
            idempotent=cfg.is_idempotent,
            tool=tool.name,
            service=cfg.service,
            endpoint=endpoint_of(str(built.url), self._secrets),
            job_id=request.job.job_id,
            call_id=request.call_id,
            empty_text=empty,
        )
        return await self._attempts(sender, once, options, replay)

    async def _execute_mcp(
        self, tool: McpTool, request: ToolRequest, options: CallOptions, replay: _Replay
    ) -> ToolOutcome:
        policy = self._config.policy
        try:
            arguments = await check_call(  # the same bounded checks, against the schema the server listed
                request.arguments_json,
                tool.parameters,
                tool.validator,
                tool.guardrails,
                url="",
                max_bytes=policy.max_argument_bytes,
                limit_s=policy.check_time_limit_s,
            )
        except (InvalidInput, Guardrail) as failure:
            return ToolOutcome(None, failure, 0, EMPTY_RESULT_TEXT)
        from sidecar.tools.mcp import McpSender  # imported when an MCP tool is configured, as McpTools was

        sender = McpSender(tool, arguments, request.arguments_json, self._secrets)
        retries = self._config.tool_retries(options.upstream_retries)
        once = OnceCall(
            key=call_hash(request.job.job_id, request.call_id, tool.name, arguments),
            window_s=self._window(tool.config.dedupe_window_s),
            longest_s=self._longest(retries, tool.timeout_s, options),
            idempotent=tool.idempotent,
            tool=tool.name,
            service=tool.service,
            endpoint=tool.session.endpoint,
            job_id=request.job.job_id,
            call_id=request.call_id,
            empty_text=EMPTY_RESULT_TEXT,
        )
        return await self._attempts(sender, once, options, replay)

    def _window(self, own: float | None) -> float:
        return self._config.policy.dedupe_window_s if own is None else own

    def _longest(self, retries: int, attempt_s: float, options: CallOptions) -> float:
        """The longest a call may run by its timeouts, retries and waits (or until its deadline)."""
        longest = (retries + 1) * attempt_s + retries * self._config.policy.tool_max_wait_s + LONGEST_MARGIN_S
        if options.deadline is not None:
            longest = min(longest, max(options.deadline - self._clock.time(), 0.0) + LONGEST_MARGIN_S)
        return longest

    async def _attempts(
        self, sender: Reaching[ToolResult], once: OnceCall, options: CallOptions, replay: _Replay
    ) -> ToolOutcome:
        """The call once (``tools.once``): its attempts, or the outcome recorded for it."""
        watched = Watched(sender)

        async def send() -> tuple[ToolOutcome, bool]:
            outcome = await self._send(watched, once, options)
            return outcome, watched.may_have_reached

        outcome, replay.replayed = await self._once.run(once, send, watched, options.deadline)
        return outcome

    async def _send(self, sender: Watched[ToolResult], once: OnceCall, options: CallOptions) -> ToolOutcome:
        """The call's attempts through the engine, behind the service's pacer; the last failure as it is."""
        tally = Tally(self._config.tool_retries(options.upstream_retries))
        pacer = ServicePacer(self._guards.get(once.service), once.tool, self._clock)
        empty = once.empty_text
        try:
            result: ToolResult = await run_attempts(
                sender,
                policy=self._policy,
                clock=self._clock,
                deadline=options.deadline,
                pacer=pacer,
                observer=self._observer,
                tally=tally,
            )
        except SidecarFailure as failure:
            return ToolOutcome(None, failure.with_attempts(tally.attempts), tally.attempts, empty)
        return ToolOutcome(result, None, tally.attempts, empty)
