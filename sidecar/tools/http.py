"""One attempt of an HTTP tool: the Sender the retry engine runs for ExecuteTool.

the request     the tool's URL template filled with the URL-quoted arguments, each path segment kept
                a segment (an argument that would make it ``.`` or ``..`` is INVALID_INPUT), its
                method, headers and body (none, the arguments as JSON, or a mapping of them); a
                read timeout clipped to the caller's deadline
what it saw     classified by core.tool_failures (the one HTTP -> kind mapping):
    success (2xx, an empty search)                         -> Done(the result)
    a timeout cut short by the caller's own deadline       -> Fail(JOB_TIMEOUT), charged to no one
    a transient fault (transport, 5xx, throttle) that may  -> Retry, quoting the service
      be re-sent: the tool is idempotent (or sends an ``idempotency_header``: the same key on every
      attempt), or the request certainly never reached the service
    anything else                                          -> Fail(the failure), as the model reads it
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from sidecar.config import ToolConfig
from sidecar.core.conversation import ToolResult
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FailureKind, RetrySignal, TransportFault
from sidecar.core.observer import AttemptStart, Target
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.settings import Quirk
from sidecar.core.taxonomy import InvalidInput, JobTimeout
from sidecar.core.text import endpoint_of
from sidecar.core.tool_failures import Observation, classify, is_transient, trigger_of
from sidecar.net.backend import AiohttpTransport
from sidecar.net.transport import fault_of, read_capped, text_of
from sidecar.tools.guardrails import Guardrails

__all__ = ["MAX_BODY_BYTES", "MAX_RESULT_CHARS", "Tool", "ToolSender", "build_request"]

MAX_RESULT_CHARS = 100_000
"""A result longer than this is cut for the model (the cut is said in the text)."""
MAX_BODY_BYTES = 1024 * 1024
"""A tool's answer is read up to this many bytes."""
_FAULT_TYPES: dict[TransportFault, str] = {
    TransportFault.TIMEOUT: "timeout",
    TransportFault.REFUSED: "connection_refused",
    TransportFault.RESET: "connection_reset",
    TransportFault.DNS: "dns",
}


@dataclass(slots=True)
class Tool:
    """A configured tool, its argument validator and guardrails compiled once."""

    name: str
    config: ToolConfig
    validator: Draft202012Validator
    guardrails: Guardrails


def build_request(client: httpx.AsyncClient, tool: Tool, arguments: dict[str, Any], url: str) -> httpx.Request:
    """The tool's request for these arguments (``url``: its template, embedded fakes resolved).

    InvalidInput when an argument would make a dot segment of the path.
    """
    cfg = tool.config

    def fill(template: str) -> str:
        out = template
        for key in cfg.parameters.get("properties", {}):  # an absent optional argument is left empty
            val = arguments.get(key, "")
            text = val if isinstance(val, str) else json.dumps(val)
            out = out.replace("{" + key + "}", urllib.parse.quote(text, safe=""))
        return out

    content: bytes | None = None
    headers = dict(cfg.headers)
    if cfg.body == "arguments":
        content = json.dumps(arguments).encode()
    elif isinstance(cfg.body, dict):
        content = json.dumps(_map_body(cfg.body, arguments)).encode()
    if content is not None:
        headers.setdefault("content-type", "application/json")
    return client.build_request(cfg.method, _fill_url(url, fill), headers=headers, content=content)


class ToolSender:
    """One attempt of one tool call."""

    __slots__ = ("_base", "_now", "_quirks", "_request", "_secrets", "_tool", "_transport", "reached")

    def __init__(
        self,
        tool: Tool,
        transport: AiohttpTransport,
        request: httpx.Request,
        *,
        value: str,
        quirks: Iterable[Quirk],
        secrets: tuple[str, ...],
        now: Callable[[], datetime],
    ) -> None:
        cfg = tool.config
        self._tool = tool
        self._transport = transport
        self._request = request
        self._quirks = list(quirks)
        self._secrets = secrets
        self._now = now
        self.reached = False
        """Whether a request of this call may have reached the service (the record of the call keeps
        an outcome only then: ``tools.once``)."""
        self._base = Observation(
            service=cfg.service,
            endpoint=endpoint_of(str(request.url), secrets),  # a token in the URL's path is masked
            kind=cfg.kind,
            parameter=cfg.identifier_parameter or "",
            value=value,
            resource_type=cfg.resource_type,
            idempotent=cfg.is_idempotent,
        )

    def describe(self, number: int) -> AttemptStart:
        url = self._request.url
        return AttemptStart(
            Target.SERVICE,
            self._tool.config.service,
            number,
            self._tool.config.method,
            self._base.endpoint,
            host=url.host,
            port=url.port,
        )

    async def send(self, attempt: Attempt) -> Done[ToolResult] | Fail | Retry:
        cfg = self._tool.config
        clipped = attempt.clipped(cfg.timeout_s)
        read_timeout = attempt.timeout(cfg.timeout_s)
        self._request.extensions["timeout"] = httpx.Timeout(
            read_timeout, connect=min(cfg.connect_timeout_s, read_timeout)
        ).as_dict()
        self._request.headers.update(attempt.record.trace_headers())  # the service may continue the trace
        obs, may_have_reached = await self._exchange(attempt)
        self.reached = self.reached or may_have_reached
        if clipped and obs.fault is TransportFault.TIMEOUT:  # the caller's budget ran out, not the service
            late = JobTimeout(f"tool {self._tool.name}", "the caller's deadline ended before the service answered")
            return Fail(late)
        failure = classify(obs, self._quirks, self._secrets, self._now())
        if failure is None:
            return Done(_result(obs))
        record = attempt.record
        record.failure_kind(failure.kind_name)
        transient = is_transient(obs, failure)
        signal = RetrySignal.RATE_LIMIT if failure.kind is FailureKind.UPSTREAM_THROTTLE else RetrySignal.TRANSIENT
        if transient:
            record.retry_signal(signal)
        if failure.retry_after is not None:
            record.asked_to_wait(failure.retry_after)
        trigger = trigger_of(obs, failure)
        if transient and (cfg.is_idempotent or not may_have_reached):
            return Retry(signal, failure.message, failure.retry_after, failure.http, failure=failure, trigger=trigger)
        return Fail(failure, trigger=trigger, answered=obs.status is not None)

    async def _exchange(self, attempt: Attempt) -> tuple[Observation, bool]:
        """What came back (a response, or a transport fault), and whether the request may have reached it."""
        try:
            # the transport excludes the upstream's time from the overhead (net.backend), its own work counted
            response = await self._transport.send(self._request)
            try:
                raw = await read_capped(response, MAX_BODY_BYTES)
            finally:
                await response.aclose()
            body = text_of(response, raw)
        except httpx.HTTPError as exc:
            fault = fault_of(exc)
            attempt.record.transport_fault(_FAULT_TYPES.get(fault.fault, "transport"), fault.detail)
            # the mapping's own words (a report knows only the fault), but for what a report cannot tell
            own = isinstance(exc, httpx.DecodingError) or not fault.may_have_reached
            detail = fault.detail if own else ""
            obs = replace(self._base, fault=fault.fault, fault_detail=detail, may_have_reached=fault.may_have_reached)
            return obs, fault.may_have_reached
        attempt.record.answered(response.status_code)
        if response.status_code >= 400:
            attempt.record.failed(str(response.status_code))
        return replace(self._base, status=response.status_code, headers=dict(response.headers), body=body), True


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


def _result(obs: Observation) -> ToolResult:
    assert obs.status is not None
    content = obs.body
    if len(content) > MAX_RESULT_CHARS:
        content = content[:MAX_RESULT_CHARS] + f"\n[result cut at {MAX_RESULT_CHARS} characters]"
    empty = obs.status == 404 or _is_empty(obs.body)
    ctype = {k.lower(): v for k, v in obs.headers.items()}.get("content-type", "")
    return ToolResult(
        content="" if obs.status == 404 else content, content_type=ctype, status_code=obs.status, empty=empty
    )


def _is_empty(body: str) -> bool:
    if not body.strip():
        return True
    try:
        parsed = loads(body)
    except ValueError:
        return False
    if parsed in ([], {}, None):
        return True
    if isinstance(parsed, dict):
        lists = [v for v in parsed.values() if isinstance(v, list)]
        return len(lists) == 1 and not lists[0] and all(not isinstance(v, dict) for v in parsed.values())
    return False


def _map_body(template: Any, arguments: dict[str, Any]) -> Any:
    if isinstance(template, dict):
        return {k: _map_body(v, arguments) for k, v in template.items()}
    if isinstance(template, list):
        return [_map_body(v, arguments) for v in template]
    if isinstance(template, str) and template.startswith("{") and template.endswith("}"):
        return arguments.get(template[1:-1])
    return template
