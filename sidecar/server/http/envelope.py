"""The sidecar's own envelope around every HTTP door's call: the ``x-sidecar-*`` headers, read and written.

    request header                what it sets                                   a bad value
    x-sidecar-job-id              the Job's id          (every door)             -
    x-sidecar-workflow-id         the Job's workflow    (every door)             -
    x-sidecar-timeout-s           the deadline: seconds, > 0, at most a day      400 naming the header
    x-sidecar-upstream-retries    the retry budget override: 0 to 100            400 naming the header
    x-sidecar-mid-stream          continue (the default) | fail | restart        400 naming the header
                                  (a stream only)
    x-sidecar-on-overflow         fail | compact: a conversation that does not   400 naming the header
                                  fit (unset: the model's on_overflow)
    x-sidecar-compaction          the strategies in order, comma-separated:      400 naming the header
                                  tool_results, reasoning, summarize (unset: the model's order)

    answer header                 what it says
    x-sidecar-attempts            the upstream attempts the call made
    x-sidecar-overhead-ms         the time the sidecar itself added (``core.overhead``), from the request's
                                  first bytes read (``hosting``'s protocol) up to the answer's write (the
                                  head's value read again there, ``hosting._Joined``): every answer of the
                                  port (``Overhead``, an ASGI wrapper)
    x-should-retry                whether an SDK should retry (``failures.py`` says when)
    x-sidecar-replayed            true: the answer of a failure the caller re-sent, from memory (``resends.py``)

The model doors (``fronts.py``) read all of them; the MCP door (``mcp_front.py``) reads the Job's. A model
door's call takes ``PRESET_DEFAULT`` (interactive) where neither the model nor ``policy.preset`` names one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sidecar.core import overhead
from sidecar.core.clock import Clock
from sidecar.core.conversation import CallOptions, Job, MidStream, Overflow, OverflowPolicy
from sidecar.core.taxonomy import InvalidInput

__all__ = [
    "ATTEMPTS_HEADER",
    "COMPACTION_HEADER",
    "JOB_HEADER",
    "MAX_HEADER_RETRIES",
    "MAX_TIMEOUT_S",
    "MID_STREAM_DEFAULT",
    "MID_STREAM_HEADER",
    "ON_OVERFLOW_HEADER",
    "OVERHEAD_HEADER",
    "PRESET_DEFAULT",
    "RETRIES_HEADER",
    "SHOULD_RETRY_HEADER",
    "TIMEOUT_HEADER",
    "WORKFLOW_HEADER",
    "Overhead",
    "call_options",
    "job_of",
    "mid_stream_of",
    "on_overflow_of",
]

JOB_HEADER = "x-sidecar-job-id"
WORKFLOW_HEADER = "x-sidecar-workflow-id"
TIMEOUT_HEADER = "x-sidecar-timeout-s"
RETRIES_HEADER = "x-sidecar-upstream-retries"
MID_STREAM_HEADER = "x-sidecar-mid-stream"
ON_OVERFLOW_HEADER = "x-sidecar-on-overflow"
COMPACTION_HEADER = "x-sidecar-compaction"
ATTEMPTS_HEADER = "x-sidecar-attempts"
SHOULD_RETRY_HEADER = "x-should-retry"
OVERHEAD_HEADER = overhead.HEADER
_OVERHEAD_KEY = OVERHEAD_HEADER.encode()
MAX_TIMEOUT_S = 24 * 3600.0
"""The longest deadline a caller may ask for in ``x-sidecar-timeout-s`` (a day)."""
MAX_HEADER_RETRIES = 100
"""The largest ``x-sidecar-upstream-retries`` (the config's own bound for upstream_retries)."""


def job_of(headers: Mapping[str, str]) -> Job:
    """The Job the call's headers name (empty ids when absent)."""
    return Job(job_id=headers.get(JOB_HEADER, ""), workflow_id=headers.get(WORKFLOW_HEADER, ""))


def call_options(headers: Mapping[str, str], clock: Clock) -> CallOptions:
    """The deadline (on the injected clock) and the retry budget override the headers ask for."""
    deadline = None
    raw = headers.get(TIMEOUT_HEADER)
    if raw is not None:
        try:
            seconds = float(raw) if raw.isascii() else math.nan  # float() reads other scripts' digits too
        except ValueError:
            seconds = math.nan
        if not 0 < seconds <= MAX_TIMEOUT_S:
            rule = f"must be seconds, more than 0 and at most {MAX_TIMEOUT_S:g}"
            raise InvalidInput(f"header {TIMEOUT_HEADER}", raw, rule)
        deadline = clock.time() + seconds
    retries = None
    raw = headers.get(RETRIES_HEADER)
    if raw is not None:
        # ASCII digits only: str.isdigit() holds for "²" too (which int() refuses), and int() refuses
        # a value of thousands of digits (Python's int_max_str_digits): neither may reach int()
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 3) or int(raw) > MAX_HEADER_RETRIES:
            rule = f"must be a whole number from 0 to {MAX_HEADER_RETRIES}"
            raise InvalidInput(f"header {RETRIES_HEADER}", raw, rule)
        retries = int(raw)
    return CallOptions(deadline=deadline, upstream_retries=retries, preset=PRESET_DEFAULT)


PRESET_DEFAULT = "interactive"
"""A model door's preset when neither the model nor ``policy.preset`` names one: an SDK call at a front has
a person or an agent loop waiting, which the interactive windows and attempt timeouts serve (a silent
provider abandoned at 10 s, a stall at 15 s) and batch's minutes of waiting do not (docs/retries.md)."""


MID_STREAM_DEFAULT = MidStream.CONTINUE
"""A front's policy when the caller names none: a plain client of the format reads one continuous reply,
continued where a deployment accepts a prefill, else ended by STREAM_INTERRUPTED (never taken back)."""


def mid_stream_of(headers: Mapping[str, str]) -> tuple[str, bool]:
    """The core's mid-stream policy for the call, and whether restarts go out as extension events."""
    raw = headers.get(MID_STREAM_HEADER)
    if raw is None:
        return MID_STREAM_DEFAULT, False
    if raw in (MidStream.FAIL, MidStream.CONTINUE):
        return raw, False
    if raw == MidStream.RESTART:
        return MidStream.RESTART, True
    raise InvalidInput(f"header {MID_STREAM_HEADER}", raw, "must be continue, fail or restart")


def on_overflow_of(headers: Mapping[str, str]) -> OverflowPolicy | None:
    """The call's overflow policy the headers ask for (None: the model's)."""
    action = headers.get(ON_OVERFLOW_HEADER)
    listed = headers.get(COMPACTION_HEADER)
    if action is None and listed is None:
        return None
    if action is not None and action not in Overflow.ACTIONS:
        raise InvalidInput(f"header {ON_OVERFLOW_HEADER}", action, f"must be {' or '.join(Overflow.ACTIONS)}")
    strategies: tuple[str, ...] = ()
    if listed is not None:
        strategies = tuple(s.strip() for s in listed.split(","))
        for s in strategies:
            if s not in Overflow.STRATEGIES or strategies.count(s) > 1:
                rule = f"must name each of {', '.join(Overflow.STRATEGIES)} at most once, comma-separated"
                raise InvalidInput(f"header {COMPACTION_HEADER}", listed, rule)
    return OverflowPolicy(action=action, strategies=strategies)


class Overhead:
    """An ASGI wrapper: each HTTP exchange measured (``core.overhead``, door ``http``), its answer's head
    carrying ``x-sidecar-overhead-ms`` (for a stream: up to the head, sent with the first event). The
    value set here is read again as the head is written (``hosting._Joined``: h11's encoding counted).

    The stopwatch begins when the server read the request's first bytes (``overhead.arrival``: the
    server's parsing counted) and ends, for the histogram, when the exchange ends: the answer written,
    a stream's chunks but for their sends (the caller's pace, a wait) counted."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        with overhead.measured("http", began=overhead.arrival()) as watch:

            async def timed(message: Any) -> None:
                kind = message["type"]
                if kind == "http.response.start":
                    headers = [*message.get("headers", ()), (_OVERHEAD_KEY, watch.milliseconds().encode())]
                    message = {**message, "headers": headers}
                elif kind == "http.response.body" and message.get("more_body", False):
                    with overhead.waiting():  # a stream's chunk: written at the caller's pace
                        await send(message)
                    return
                await send(message)

            await self._app(scope, receive, timed)
