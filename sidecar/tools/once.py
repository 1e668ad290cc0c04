"""Tool calls that happen once: a call's key, its record, and a re-send answered from the record.

A call is *the same call* when its job id, call id, tool and arguments (compared as JSON values)
are the same. Its hash names it twice: as the key of its record in the state backend, and as the
idempotency key a tool with ``idempotency_header`` sends on every attempt (``idempotency_key``)::

    no job id or no call id           sent as ever and not remembered: a re-send cannot be told
                                      from a new call (an idempotency key is still sent, one per
                                      ExecuteTool, the same on each of its retries)
    window 0 (dedupe_window_s)        not remembered (the key is still the call's own)
    in flight in this process         the re-send waits for it (up to its own deadline), then
                                      answers what it answered
    the record (claim_call)           free -> the intent is written, the call is sent, its
                                      outcome recorded for the window (nothing reached the
                                      service -> the intent is removed: a re-send is sent)
                                      this process's record: before the call returns; a shared
                                      one (Redis): in the background, the answer not waiting for
                                      it; until it lands the outcome is held here (``pending``: a
                                      re-send here is answered from it), written whole even if
                                      the caller leaves, and ``aclose`` (a graceful stop) waits
                                      for it; one the backend does not take is kept in this
                                      process, logged, and answered
                                      an outcome -> that outcome, nothing sent
                                      an intent of a live replica -> polled until it is an outcome
                                      an intent whose replica is gone (killed, restarted) ->
                                        idempotent tool: sent again (with the same key)
                                        otherwise EXTERNAL_SERVICE "outcome unknown, not sent again"
    the caller cancels mid-send       not idempotent: "outcome unknown" recorded; else removed
      (or the sending breaks: a bug)
    the backend cannot answer         this process's own record decides (as every local decision)

The window of the background write: a process killed between a call's answer and its outcome's
write (one round trip, about a millisecond; up to RECORD_TRIES x timeout_ms while Redis stalls)
leaves its intent: a re-send anywhere is answered "outcome unknown, not sent again" (an idempotent
tool: sent again), not the outcome the first caller got. Never sent twice; a re-send at another
replica while the write is on its way finds a live intent and waits for the outcome.

The record holds a result or a failure, with the configured secrets masked, and never the
request, its headers or its arguments (the key is a hash of those).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import hashlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from sidecar.core import details as _details
from sidecar.core import kinds as _kinds
from sidecar.core import overhead
from sidecar.core.clock import Clock
from sidecar.core.conversation import ToolOutcome, ToolResult
from sidecar.core.details import HttpInfo, ServiceDetail
from sidecar.core.kinds import FailureKind
from sidecar.core.observer import AttemptStart
from sidecar.core.redact import mask_secrets
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.state import CallClaim, CallRecords, Claimed, InProgress, MemoryRecords, Recorded
from sidecar.core.taxonomy import ExternalService, JobTimeout, SidecarFailure, failure_class
from sidecar.core.text import cap

__all__ = ["KEY_PREFIX", "Once", "OnceCall", "Watched", "call_hash", "decode", "encode", "idempotency_key"]

T = TypeVar("T")
KEY_PREFIX = "sidecar-"
"""An idempotency key is this and 48 hex digits of the call's hash."""
POLL_MIN_S = 0.05
POLL_MAX_S = 1.0
"""A call in progress on another replica is looked at again after these waits (doubling)."""
RECORD_VERSION = 1
UNKNOWN = "outcome unknown, not sent again"
_log = logging.getLogger("sidecar.tools")


def call_hash(job_id: str, call_id: str, tool: str, arguments: Any) -> str | None:
    """The call's name (hex SHA-256), or None when it has no job id or no call id."""
    if not job_id or not call_id:
        return None
    text = json.dumps([job_id, call_id, tool, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def idempotency_key(key: str | None, rng: random.Random) -> str:
    """The key every attempt of the call sends: the call's hash, or one of its own for an unnamed call."""
    return KEY_PREFIX + (key[:48] if key is not None else f"{rng.getrandbits(192):048x}")


# ---------------------------------------------------------------------------- the recorded outcome

_DETAILS: dict[str, type[Any]] = {
    name: getattr(_details, name) for name in _details.__all__ if dataclasses.is_dataclass(getattr(_details, name))
}
_ENUMS: dict[str, type[enum.Enum]] = {
    e.__name__: e for e in (_kinds.CircuitState, _kinds.FailureKind, _kinds.RetrySignal, _kinds.TransportFault)
}


def encode(outcome: ToolOutcome, secrets: tuple[str, ...]) -> str:
    """The outcome as the record keeps it (JSON), every string masked."""

    def value(v: Any) -> Any:
        if isinstance(v, str):
            return mask_secrets(v, secrets)
        if isinstance(v, enum.Enum):
            return {"$e": type(v).__name__, "v": v.name}
        if isinstance(v, datetime):
            return {"$t": v.isoformat()}
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = {f.name: value(getattr(v, f.name)) for f in dataclasses.fields(v)}
            return {"$d": type(v).__name__, **fields}
        if isinstance(v, tuple | list):
            return [value(x) for x in v]
        return v

    failure = outcome.failure
    body: dict[str, Any] = {"v": RECORD_VERSION, "a": outcome.attempts}
    if outcome.result is not None:
        body["r"] = value(outcome.result)
    if failure is not None:
        body["f"] = {
            "k": failure.kind.name,
            "m": value(failure.message),
            "a": failure.attempts,
            "ra": failure.retry_after,
            "h": value(failure.http),
            "d": value(failure.detail),
        }
    return json.dumps(body, ensure_ascii=False)


def decode(text: str, empty_text: str) -> ToolOutcome:
    """The recorded outcome; ValueError when the record cannot be read."""

    def value(v: Any) -> Any:
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        if not isinstance(v, dict):
            return v
        if "$e" in v:
            return _ENUMS[v["$e"]][v["v"]]
        if "$t" in v:
            return datetime.fromisoformat(v["$t"])
        cls = _DETAILS.get(v.get("$d", "")) or (ToolResult if v.get("$d") == "ToolResult" else None)
        if cls is None:
            raise ValueError(f"an unknown record type {v.get('$d')!r}")
        return cls(**{k: value(x) for k, x in v.items() if k != "$d"})

    try:
        body = json.loads(text)
        if body.get("v") != RECORD_VERSION:
            raise ValueError(f"record version {body.get('v')!r}")
        result = value(body["r"]) if "r" in body else None
        failure: SidecarFailure | None = None
        if "f" in body:
            f = body["f"]
            http = value(f["h"])
            failure = failure_class(FailureKind[f["k"]]).worded(
                f["m"],
                detail=value(f["d"]),
                http=http if isinstance(http, HttpInfo) else None,
                retry_after=f["ra"],
            )
            failure.with_attempts(int(f["a"]))
        if (result is None) == (failure is None) or (result is not None and not isinstance(result, ToolResult)):
            raise ValueError("a record holds a result or a failure")
        return ToolOutcome(result, failure, int(body["a"]), empty_text)
    except (KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"an unreadable record ({type(exc).__name__})") from None


# ---------------------------------------------------------------------------- the senders, watched


class Reaching(Protocol[T]):
    """A Sender that says whether a request of it may have reached the service."""

    reached: bool

    def describe(self, number: int) -> AttemptStart: ...

    async def send(self, attempt: Attempt) -> Done[T] | Fail | Retry: ...


class Watched(Generic[T]):
    """A sender whose attempts are watched: may any request of the call have reached the service?"""

    __slots__ = ("_cut", "_inner")

    def __init__(self, inner: Reaching[T]) -> None:
        self._inner = inner
        self._cut = False

    @property
    def may_have_reached(self) -> bool:
        """True once an attempt may have been delivered, or was cut while it was being sent."""
        return self._inner.reached or self._cut

    def describe(self, number: int) -> AttemptStart:
        return self._inner.describe(number)

    async def send(self, attempt: Attempt) -> Done[T] | Fail | Retry:
        try:
            return await self._inner.send(attempt)
        except BaseException:
            self._cut = True  # cancelled (or broken) while the request may have been on its way
            raise


# ---------------------------------------------------------------------------- the call, once


@dataclass(frozen=True, slots=True)
class OnceCall:
    """What the dedupe needs of one call."""

    key: str | None
    """``call_hash``: None for a call without a job id or a call id."""
    window_s: float
    longest_s: float
    """The longest the call may take (timeouts, retries, waits): an intent is kept this long more."""
    idempotent: bool
    tool: str
    service: str
    endpoint: str
    job_id: str
    call_id: str
    empty_text: str


Send = Callable[[], Awaitable[tuple[ToolOutcome, bool]]]
"""Sends the call: its outcome, and whether a request may have reached the service."""


class Once:
    """The dedupe of one process: calls in flight here, the shared record (or this process's own)."""

    def __init__(self, clock: Clock, records: CallRecords | None, secrets: tuple[str, ...]) -> None:
        self._clock = clock
        self._local = MemoryRecords(clock)
        self._shared = records
        self._secrets = secrets
        self._in_flight: dict[str, asyncio.Future[ToolOutcome]] = {}
        self._pending: dict[str, str] = {}
        """Outcomes answered whose write to the backend has not landed (or failed) yet, by key."""
        self._later: set[asyncio.Task[Any]] = set()

    @property
    def local(self) -> MemoryRecords:
        return self._local

    async def aclose(self) -> None:
        """Let the outcomes written in the background (after an answer, or a cancelled call) reach the backend."""
        if self._later:
            await asyncio.gather(*self._later, return_exceptions=True)

    async def run(
        self, call: OnceCall, send: Send, watched: Watched[Any], deadline: float | None
    ) -> tuple[ToolOutcome, bool]:
        """The outcome, and whether it was answered from the record (True) or sent by this call."""
        key = call.key
        if key is None or call.window_s <= 0:
            return (await send())[0], False
        while True:
            first = self._in_flight.get(key)
            if first is None:
                break
            waited = await self._wait(first, call, deadline)
            if waited is not None:
                return waited, True
            # the call in flight was cancelled: what it left in the record decides, below
        future: asyncio.Future[ToolOutcome] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            outcome, replayed = await self._claimed(call, send, watched, deadline)
        except BaseException:
            future.cancel()
            raise
        else:
            future.set_result(outcome)
            return outcome, replayed
        finally:
            if self._in_flight.get(key) is future:
                del self._in_flight[key]

    async def _claimed(
        self, call: OnceCall, send: Send, watched: Watched[Any], deadline: float | None
    ) -> tuple[ToolOutcome, bool]:
        assert call.key is not None
        key = call.key
        ttl = call.window_s + call.longest_s
        poll = POLL_MIN_S
        while True:
            since = self._clock.wall().timestamp()
            records: CallRecords = self._local
            held: CallClaim | None = None
            text = self._pending.get(key)  # answered here, its write on its way: no round trip
            if text is not None:
                return self._replay(call, text), True
            if self._shared is not None:
                kept = self._local.peek(key)  # an outcome the backend could not take when it was recorded
                if isinstance(kept, Recorded):
                    return self._replay(call, kept.outcome), True
                records = self._shared
                held = await self._shared.claim_call(key, ttl, since)
            if held is None:  # the memory backend, or one that cannot answer: this process's record decides
                records = self._local
                held = await self._local.claim_call(key, ttl, since)
            match held:
                case Claimed(token):
                    return await self._send(call, send, watched, records, token, since), False
                case Recorded(text):
                    return self._replay(call, text), True
                case InProgress(owner, started, alive) if alive and owner != records.owner:
                    left = None if deadline is None else deadline - self._clock.time()
                    if left is not None and left <= 0:
                        return self._still_running(call), True
                    with overhead.waiting():
                        await self._clock.sleep(poll if left is None else min(poll, left))
                    poll = min(poll * 2, POLL_MAX_S)
                case InProgress(owner, started, alive):
                    if call.idempotent:  # its sender is gone, and repeating it is safe: sent again
                        return await self._send(call, send, watched, records, None, since), False
                    why = "the sidecar sending it stopped before its outcome was recorded"
                    return _outcome(unknown(call, started, why), call), True
                case _:
                    raise AssertionError(f"no claim: {held!r}")

    async def _send(
        self,
        call: OnceCall,
        send: Send,
        watched: Watched[Any],
        records: CallRecords,
        token: str | None,
        since: float,
    ) -> ToolOutcome:
        assert call.key is not None
        key = call.key
        try:
            outcome, reached = await send()
        except BaseException as exc:  # cancelled by the caller (or a bug, SYSTEM above): no outcome to record
            if watched.may_have_reached and not call.idempotent:
                cancelled = isinstance(exc, asyncio.CancelledError)
                why = f"the call sending it {'was cancelled' if cancelled else 'failed'} before the service answered"
                self._write_later(call, records, encode(_outcome(unknown(call, since, why), call), self._secrets))
            elif token is not None:
                self._soon(records.abandon_call(key, token))
            raise
        if reached and records is self._local:  # no round trip: recorded before the answer leaves
            await asyncio.shield(self._soon(self._finish(call, records, encode(outcome, self._secrets))))
        elif reached:  # the answer leaves now; the outcome is held here until its write lands
            self._write_later(call, records, encode(outcome, self._secrets))
        elif token is not None:  # nothing reached the service: a re-send may go
            await records.abandon_call(key, token)
        return outcome

    def _write_later(self, call: OnceCall, records: CallRecords, text: str) -> None:
        """Write the outcome in the background, held in ``_pending`` (answered from) until it lands or is kept."""
        assert call.key is not None
        key = call.key
        self._pending[key] = text

        async def write() -> None:
            try:
                await self._finish(call, records, text)
            finally:
                if self._pending.get(key) is text:
                    del self._pending[key]

        self._soon(write())

    async def _finish(self, call: OnceCall, records: CallRecords, text: str) -> None:
        assert call.key is not None
        if await records.finish_call(call.key, text, call.window_s) or records is self._local:
            return
        await self._local.finish_call(call.key, text, call.window_s)  # the backend did not take it: kept here
        _log.warning(
            "tool %s: the state backend did not take the outcome of call %s: answered, and kept in this process "
            "until the backend takes it; a re-send elsewhere meanwhile waits for it, or is answered 'outcome "
            "unknown' (not sent again) if this process stops first",
            call.tool,
            cap(call.call_id, 80),
            extra={"tool": call.tool, "call_id": call.call_id},
        )

    def _soon(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._later.add(task)
        task.add_done_callback(self._later.discard)
        return task

    def _replay(self, call: OnceCall, text: str) -> ToolOutcome:
        try:
            outcome = decode(text, call.empty_text)
        except ValueError as exc:
            _log.warning("tool %s: the record of call %s is unreadable (%s)", call.tool, cap(call.call_id, 80), exc)
            return _outcome(unknown(call, 0.0, "its record cannot be read"), call)
        _log.info(
            "tool %s: call %s answered from its record, not sent again",
            call.tool,
            cap(call.call_id, 80),
            extra={"tool": call.tool, "call_id": call.call_id},
        )
        return outcome

    async def _wait(
        self, first: asyncio.Future[ToolOutcome], call: OnceCall, deadline: float | None
    ) -> ToolOutcome | None:
        """What the call in flight answers; None when it was cancelled; JOB_TIMEOUT at the deadline."""
        ended = asyncio.Event()
        stop = self._clock.call_at(deadline, ended.set) if deadline is not None else (lambda: None)
        timer: asyncio.Future[Any] = asyncio.ensure_future(ended.wait())
        watched: list[asyncio.Future[Any]] = [first, timer]
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop()
            timer.cancel()
        if not first.done():
            return self._still_running(call)
        if first.cancelled():
            return None
        return first.result()

    def _still_running(self, call: OnceCall) -> ToolOutcome:
        reason = (
            f"the same call (job '{cap(call.job_id, 80)}', call '{cap(call.call_id, 80)}') is still in progress, "
            "and it was not sent again"
        )
        return _outcome(JobTimeout(f"tool {call.tool}", reason), call)


def unknown(call: OnceCall, since: float, why: str) -> ExternalService:
    """The answer to a re-send whose first sending left no outcome: EXTERNAL_SERVICE, not sent again."""
    at = f" at {datetime.fromtimestamp(since, UTC):%Y-%m-%d %H:%M:%S} UTC" if since > 0 else ""
    message = (
        f"The {call.service} service may already have received this call (job '{cap(call.job_id, 80)}', "
        f"call '{cap(call.call_id, 80)}'): it began to be sent{at}, and {why}. Outcome unknown, not sent "
        "again: check before repeating this call (it is not idempotent)."
    )
    detail = ServiceDetail(service=call.service, endpoint=call.endpoint, detail=UNKNOWN)
    return ExternalService.worded(message, detail=detail)


def _outcome(failure: SidecarFailure, call: OnceCall) -> ToolOutcome:
    return ToolOutcome(None, failure, 0, call.empty_text)
