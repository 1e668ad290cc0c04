"""Run one tool call: check the input, pass the service's circuit and throttle, send, classify, retry.

Retries: transport faults, 5xx and throttles of an idempotent tool are re-sent within the
call's budget (``job.upstream_retries``, else ``policy.tool_retries``), waiting
``uniform(tool_window) x min(attempt, 10)`` (capped at ``tool_max_wait_s``) or the service's
Retry-After, and never past the caller's deadline. A non-idempotent tool is re-sent only when
the request certainly never reached the service (refused, DNS, no connection in time).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from opentelemetry import propagate, trace
from sidecar_client._proto.sidecar.v1 import sidecar_pb2 as pb

from sidecar.config import Config, ToolConfig, Windows
from sidecar.core.backoff import window_wait
from sidecar.core.circuit import ServiceGuard, ServiceGuards
from sidecar.core.clock import Clock
from sidecar.core.netbackend import fast_transport
from sidecar.core.pacer import Overdue
from sidecar.core.taxonomy import Guardrail, InvalidInput, JobTimeout, SidecarFailure
from sidecar.core.text import endpoint_of
from sidecar.core.tool_failures import Observation, classify, is_service_failure, is_transient, trigger_of
from sidecar.core.transport import fault_of, read_capped
from sidecar.telemetry import names as n
from sidecar.telemetry.metrics import Metrics
from sidecar.telemetry.tracing import Tracer, use_span
from sidecar.tools.arguments import check_call, validator_for
from sidecar.tools.guardrails import Guardrails

__all__ = ["ToolOutcome", "ToolRunner"]

MAX_RESULT_CHARS = 100_000
"""A result longer than this is cut for the model (the cut is said in the text)."""
EMPTY_SEARCH_TEXT = "The search found no results."
EMPTY_RESULT_TEXT = "The tool returned an empty result."
MAX_BODY_BYTES = 1024 * 1024
"""A tool's answer is read up to this many bytes."""
MAX_UPSTREAM_RETRIES = 100
"""A caller's ``job.upstream_retries`` above this is refused (the config allows no more either)."""
_tracer = Tracer(n.TRACER)


@dataclass(slots=True)
class ToolOutcome:
    """A tool call's outcome: a result or a failure, and the upstream attempts made."""

    result: pb.ToolResult | None
    failure: SidecarFailure | None
    attempts: int
    empty_text: str = EMPTY_SEARCH_TEXT
    """What the model reads for an empty result (a search's, or any other tool's)."""

    @property
    def model_text(self) -> str:
        if self.failure is not None:
            return self.failure.explain_to_llm()
        assert self.result is not None
        if self.result.empty and not self.result.content.strip():
            return self.empty_text
        return self.result.content


@dataclass(slots=True)
class _Tool:
    name: str
    config: ToolConfig
    validator: Draft202012Validator
    guardrails: Guardrails


class ToolRunner:
    """Every configured tool, sharing one HTTP client and the service guards."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        guards: ServiceGuards,
        embedded: dict[str, str] | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._config = config
        self._metrics = metrics or Metrics()
        self._clock = clock
        self._guards = guards
        self._embedded = embedded or {}
        self._rng = rng or random.Random()
        self._secrets = config.secrets()
        self._windows = Windows(max_wait_s=config.policy.tool_max_wait_s)
        self._tools = {
            name: _Tool(name, tool, validator_for(tool.parameters), Guardrails(tool.guardrails))
            for name, tool in config.tools.items()
        }
        self._client = httpx.AsyncClient(
            transport=fast_transport(httpx.Limits(max_connections=200, max_keepalive_connections=50)),
            follow_redirects=False,
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def resolve(self, url: str) -> str:
        for name, base in self._embedded.items():
            prefix = f"embedded://{name}"
            if url.startswith(prefix):
                return base.rstrip("/") + url[len(prefix) :]
        return url

    async def execute(
        self, name: str, arguments_json: str, *, retries: int | None, deadline: float | None
    ) -> ToolOutcome:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none are configured"
            failure = InvalidInput("tool", name, f"must name a tool that exists: {known}")
            return ToolOutcome(None, failure, 0)
        if retries is not None and retries > MAX_UPSTREAM_RETRIES:
            failure = InvalidInput("job.upstream_retries", str(retries), f"must be at most {MAX_UPSTREAM_RETRIES}")
            return ToolOutcome(None, failure, 0)
        try:
            arguments = await check_call(  # bounded: size, depth, time; large ones off the event loop
                arguments_json,
                tool.config.parameters,
                tool.validator,
                tool.guardrails,
                url=tool.config.url,
                max_bytes=self._config.policy.max_argument_bytes,
                limit_s=self._config.policy.check_time_limit_s,
            )
        except (InvalidInput, Guardrail) as failure:
            return ToolOutcome(None, failure, 0)
        return await self._run(tool, arguments, retries, deadline)

    async def _run(
        self, tool: _Tool, arguments: dict[str, Any], retries: int | None, deadline: float | None
    ) -> ToolOutcome:
        cfg = tool.config
        policy = self._config.policy
        budget = policy.tool_retries if retries is None else retries
        guard = self._guards.get(cfg.service)
        try:
            request = self._build(tool, arguments)
        except InvalidInput as refused:
            return ToolOutcome(None, refused, 0)
        id_param = cfg.identifier_parameter
        value = str(arguments.get(id_param, "")) if id_param else ""
        attempts = 0
        while True:
            try:
                admission = guard.check()
            except SidecarFailure as refusal:
                return self._outcome(tool, None, refusal.with_attempts(attempts), attempts)
            try:  # from here on the admission is settled exactly once, whatever happens
                late = await self._pace(tool, guard, deadline)
                if late is not None:
                    guard.lost(admission)
                    return self._outcome(tool, None, late.with_attempts(attempts), attempts)
                attempts += 1
                obs, may_have_reached, clipped, span = await self._send(
                    tool, request, attempts, deadline, id_param or "", value
                )
                try:  # the attempt's span stays open until its outcome is judged
                    if clipped and obs.fault == pb.TRANSPORT_FAULT_TIMEOUT:  # the caller's budget, not the service
                        guard.lost(admission)
                        late = JobTimeout(
                            f"tool {tool.name}", "the caller's deadline ended before the service answered"
                        )
                        return self._outcome(tool, None, late.with_attempts(attempts), attempts)
                    quirks = self._config.service(cfg.service).quirks
                    failure = classify(obs, quirks, self._secrets, self._clock.wall())
                    if failure is None:
                        guard.success(admission)
                        return self._outcome(tool, self._result(obs), None, attempts)
                    if is_service_failure(failure):
                        guard.failure(admission, trigger_of(obs, failure), failure.retry_after)
                    elif admission.probe and failure.http is not None:
                        guard.success(admission)  # the service answered the probe: it is up
                    else:
                        guard.lost(admission)  # the caller's mistake: charged to no one
                    failure.with_attempts(attempts)
                    span.set_attribute(n.FAILURE_KIND, failure.kind_name)
                    transient = is_transient(obs, failure)
                    signal = "rate_limit" if failure.kind == pb.FAILURE_KIND_UPSTREAM_THROTTLE else "transient"
                    if transient:
                        span.set_attribute(n.RETRY_SIGNAL, signal)
                    if failure.retry_after is not None:
                        span.set_attribute(n.RETRY_AFTER, failure.retry_after)
                    resend_ok = cfg.is_idempotent or not may_have_reached
                    if not transient or not resend_ok or attempts > budget:
                        return self._outcome(tool, None, failure, attempts)
                    wait = failure.retry_after
                    if wait is None:
                        wait = window_wait(policy.tool_window, attempts, self._windows, self._rng)
                    elif wait > policy.tool_max_wait_s:  # asked for longer than a tool call may wait
                        return self._outcome(tool, None, failure, attempts)
                    if deadline is not None and self._clock.time() + wait > deadline:
                        return self._outcome(tool, None, failure, attempts)
                    span.set_attribute(n.RETRY_WAIT, wait)
                finally:
                    span.end()
            except BaseException:
                guard.lost(admission)  # cancelled (or a bug): charged to no one; a held probe is released
                raise
            self._metrics.retry(signal, service=cfg.service)
            backoff: dict[str, str | float] = {
                n.WAIT_SECONDS: wait,
                n.RETRY_SIGNAL: signal,
                n.ATTEMPT: attempts,
                n.SERVICE: cfg.service,
            }
            started = self._clock.time()
            with _tracer.start_as_current_span(n.SPAN_BACKOFF, attributes=backoff):
                await self._clock.sleep(wait)
            self._metrics.wait("backoff", self._clock.time() - started, service=cfg.service)

    @staticmethod
    def _outcome(
        tool: _Tool, result: pb.ToolResult | None, failure: SidecarFailure | None, attempts: int
    ) -> ToolOutcome:
        empty = EMPTY_SEARCH_TEXT if tool.config.kind == "search" else EMPTY_RESULT_TEXT
        return ToolOutcome(result, failure, attempts, empty)

    async def _pace(self, tool: _Tool, guard: ServiceGuard, deadline: float | None) -> SidecarFailure | None:
        """Wait for the service's throttle; a slot past the deadline is refused at once, nothing waited."""
        try:
            booking = guard.reserve(deadline)
        except Overdue as late:
            left = max((deadline or 0.0) - self._clock.time(), 0.0)
            return JobTimeout(
                f"tool {tool.name}",
                f"the {guard.name} service is throttled for {late.wait:.1f} s, but only {left:.1f} s remain",
                retry_after=late.wait,
            )
        wait = booking.at - self._clock.time()
        if wait <= 0:
            return None
        attrs: dict[str, float | str] = {n.WAIT_SECONDS: wait, n.SERVICE: guard.name, n.THROTTLE: guard.throttle}
        started = self._clock.time()
        with _tracer.start_as_current_span(n.SPAN_THROTTLE_WAIT, attributes=attrs):
            await guard.pace(booking)
        self._metrics.wait("throttle", self._clock.time() - started, service=guard.name)
        return None

    def _build(self, tool: _Tool, arguments: dict[str, Any]) -> httpx.Request:
        """The request of a call; InvalidInput when an argument would make a dot segment of the path."""
        cfg = tool.config

        def fill(template: str) -> str:
            out = template
            for key in cfg.parameters.get("properties", {}):  # an absent optional argument is left empty
                val = arguments.get(key, "")
                text = val if isinstance(val, str) else json.dumps(val)
                out = out.replace("{" + key + "}", urllib.parse.quote(text, safe=""))
            return out

        url = self.resolve(_fill_url(cfg.url, fill))
        content: bytes | None = None
        headers = dict(cfg.headers)
        if cfg.body == "arguments":
            content = json.dumps(arguments).encode()
        elif isinstance(cfg.body, dict):
            content = json.dumps(_map_body(cfg.body, arguments)).encode()
        if content is not None:
            headers.setdefault("content-type", "application/json")
        return self._client.build_request(cfg.method, url, headers=headers, content=content)

    async def _send(
        self, tool: _Tool, request: httpx.Request, attempt: int, deadline: float | None, parameter: str, value: str
    ) -> tuple[Observation, bool, bool, trace.Span]:
        """One HTTP attempt under its own CLIENT span, returned open (the caller ends it)."""
        cfg = tool.config
        endpoint = endpoint_of(str(request.url), self._secrets)  # a token in the URL's path is masked
        base = Observation(
            service=cfg.service,
            endpoint=endpoint,
            kind=cfg.kind,
            parameter=parameter,
            value=value,
            resource_type=cfg.resource_type,
            idempotent=cfg.is_idempotent,
        )
        read_timeout = cfg.timeout_s
        clipped = deadline is not None and deadline - self._clock.time() < read_timeout
        if deadline is not None:
            read_timeout = max(min(read_timeout, deadline - self._clock.time()), 0.001)
        request.extensions["timeout"] = httpx.Timeout(
            read_timeout, connect=min(cfg.connect_timeout_s, read_timeout)
        ).as_dict()
        attrs: dict[str, Any] = {
            n.HTTP_METHOD: cfg.method,
            n.URL_FULL: endpoint,
            n.SERVER_ADDRESS: request.url.host,
            n.ATTEMPT: attempt,
            n.SERVICE: cfg.service,
        }
        if request.url.port:
            attrs[n.SERVER_PORT] = request.url.port
        if attempt > 1:
            attrs[n.HTTP_RESEND_COUNT] = attempt - 1
        span = _tracer.start_span(cfg.method, kind=trace.SpanKind.CLIENT, attributes=attrs)
        try:
            with use_span(span):
                if span.is_recording():  # the service may continue the trace from this attempt
                    propagate.inject(request.headers)
                obs, may_have_reached = await self._exchange(request, span, base)
        except BaseException as exc:  # cancelled, or a bug: the span must not stay open
            span.set_attribute(n.ERROR_TYPE, "cancelled" if isinstance(exc, asyncio.CancelledError) else "internal")
            span.end()
            raise
        return obs, may_have_reached, clipped, span

    async def _exchange(self, request: httpx.Request, span: trace.Span, base: Observation) -> tuple[Observation, bool]:
        try:
            response = await self._client.send(request, stream=True)
            try:
                raw = await read_capped(response, MAX_BODY_BYTES)
            finally:
                await response.aclose()
            body = raw.decode(response.encoding or "utf-8", errors="replace")
        except httpx.HTTPError as exc:
            fault = fault_of(exc)
            span.set_attribute(n.ERROR_TYPE, _fault_type(fault.fault))
            span.set_status(trace.StatusCode.ERROR, fault.detail)
            # the mapping's own words (a report knows only the fault), but for what a report cannot tell
            own = isinstance(exc, httpx.DecodingError) or not fault.may_have_reached
            detail = fault.detail if own else ""
            obs = replace(base, fault=fault.fault, fault_detail=detail, may_have_reached=fault.may_have_reached)
            return obs, fault.may_have_reached
        span.set_attribute(n.HTTP_STATUS, response.status_code)
        if response.status_code >= 400:
            span.set_attribute(n.ERROR_TYPE, str(response.status_code))
            span.set_status(trace.StatusCode.ERROR)
        obs = replace(base, status=response.status_code, headers=dict(response.headers), body=body)
        return obs, True

    def _result(self, obs: Observation) -> pb.ToolResult:
        assert obs.status is not None
        content = obs.body
        if len(content) > MAX_RESULT_CHARS:
            content = content[:MAX_RESULT_CHARS] + f"\n[result cut at {MAX_RESULT_CHARS} characters]"
        empty = obs.status == 404 or _is_empty(obs.body)
        ctype = {k.lower(): v for k, v in obs.headers.items()}.get("content-type", "")
        return pb.ToolResult(
            content="" if obs.status == 404 else content,
            content_type=ctype,
            status_code=obs.status,
            empty=empty,
        )


_FAULT_TYPES: dict[int, str] = {
    pb.TRANSPORT_FAULT_TIMEOUT: "timeout",
    pb.TRANSPORT_FAULT_REFUSED: "connection_refused",
    pb.TRANSPORT_FAULT_RESET: "connection_reset",
    pb.TRANSPORT_FAULT_DNS: "dns",
}


def _fault_type(fault: int) -> str:
    return _FAULT_TYPES.get(fault, "transport")


def _is_empty(body: str) -> bool:
    if not body.strip():
        return True
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if parsed in ([], {}, None):
        return True
    if isinstance(parsed, dict):
        lists = [v for v in parsed.values() if isinstance(v, list)]
        return len(lists) == 1 and not lists[0] and all(not isinstance(v, dict) for v in parsed.values())
    return False


_URL_PARTS = re.compile(r"^([^:/?#]+://[^/?#]*)([^?#]*)(.*)$", re.DOTALL)
_DOT_SEGMENTS = (".", "..")


def _fill_url(template: str, fill: Callable[[str], str]) -> str:
    """``template`` with its placeholders filled, each path segment kept a segment.

    ``fill`` quotes every value (``/`` becomes ``%2F``), but a segment that comes out as exactly
    ``.`` or ``..`` would still be resolved away (``/items/..`` is sent as ``/``); sending it as
    ``%2E%2E`` would not be safe either, since RFC 3986 makes that the same segment and a
    normalizing proxy or server resolves it. No identifier is a dot segment: it is refused.
    The query string and fragment are not path segments (dots are fine there).
    """
    parts = _URL_PARTS.match(template)
    if parts is None:  # the config allows no such URL; fill it whole
        return fill(template)
    origin, path, rest = parts.groups()
    segments = []
    for segment in path.split("/"):
        filled = fill(segment)
        if filled in _DOT_SEGMENTS and filled != segment:
            names = re.findall(r"\{([^}]+)\}", segment)
            raise InvalidInput(
                names[0] if len(names) == 1 else "arguments",
                filled,
                "must not be '.' or '..': it fills a segment of the URL's path, where a dot segment would "
                "send the request to another path; send the identifier itself",
            )
        segments.append(filled)
    return fill(origin) + "/".join(segments) + fill(rest)


def _map_body(template: Any, arguments: dict[str, Any]) -> Any:
    if isinstance(template, dict):
        return {k: _map_body(v, arguments) for k, v in template.items()}
    if isinstance(template, list):
        return [_map_body(v, arguments) for v in template]
    if isinstance(template, str) and template.startswith("{") and template.endswith("}"):
        return arguments.get(template[1:-1])
    return template
