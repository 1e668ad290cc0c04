"""A client that re-sends a failure does not multiply the provider's calls: the model fronts' replay memo.

Every failure a model front answers says ``x-should-retry: false`` (``failures.py``), and the
official openai and anthropic SDKs obey it. Other clients do not read it: the Vercel AI SDK re-sends
a 429 or a 5xx twice by default, LlamaIndex a whole call's 429 or 5xx twice (a streamed call not at all),
smolagents any error whose text holds "429". Each re-send of a failure the sidecar already retried, or
already judged final, would be a whole call again (a quota error reaching the provider once per re-send,
a rate limit's retries run again). So the fronts remember the failures they answered, briefly, and
answer a re-send of the same request from memory::

    the same request     the same caller (the peer's address and the credential it presented:
                         ``Authorization: Bearer`` or ``x-api-key``, a server.auth token or, without
                         auth, whatever the SDK sends), the same door (its path), the same
                         ``x-sidecar-*`` request headers (a new deadline, budget or job is another
                         request) and the same body bytes, under the same config (a reload applied
                         since: ``Live.swaps``, nothing answered before is replayed, as the operator
                         may have fixed the cause); kept as one HMAC-SHA-256 digest (its key
                         random per process: no credential, body or plain hash of either is held)
    what is remembered   a failure of the call the sidecar judged (``window_of``): retries exhausted,
                         a final failure (quota, invalid input, an unknown model, a refusal ...), a
                         throttle; never a success, never the sidecar's own refusals (shed, draining:
                         ``x-should-retry: true``, a retry there costs no upstream attempt), never a
                         failure of the caller going away (JOB_CANCELLED) nor SYSTEM (a fault of ours)
    for how long         the wait the answer carried (its Retry-After), at most MAX_WINDOW_S; without
                         one FINAL_FAILURE_WINDOW_S; JOB_TIMEOUT only with a wait (a slow upstream may
                         answer the next deadline in time)
    the re-send's answer the first answer's status, headers and body byte for byte, but ``retry-after``
                         and ``retry-after-ms`` count down (what is left of the window), and with
                         ``x-sidecar-replayed: true``; ``x-sidecar-attempts`` stays the first answer's
                         count. No call to the core, no admission slot, no upstream attempt
    counted              ``sidecar.http.replayed`` (http.route, sidecar.failure.kind) and the event
                         ``sidecar.replayed`` on the re-send's SERVER span (``tracing.replayed``)
    bounded              MAX_ENTRIES answers and MAX_BYTES of them, the least recently used forgotten
                         first; expiry on the injected clock (``core.clock``), so tests step it

A stream's failure before its head (``"stream": true`` answered with a status, as a whole call's)
is remembered the same way; a failure after the head is an event of a stream already under way,
never replayed. Two identical requests in flight together both run: only a re-send that comes
after the answer is replayed. The gRPC port keeps no such memo: its clients are the project's own
and honour the Failure's RetryInfo and retry line (a non-retryable failure is not sent again).
"""

from __future__ import annotations

import hmac
import math
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.trace import Span
from starlette.requests import Request
from starlette.responses import Response

from sidecar.core.clock import Clock
from sidecar.core.details import ServiceDetail
from sidecar.core.kinds import FailureKind
from sidecar.core.taxonomy import SidecarFailure
from sidecar.server.auth import bearer_token
from sidecar.server.http.access import API_KEY_HEADER
from sidecar.server.http.tracing import replayed
from sidecar.server.refusals import SIDECAR_SERVICE

__all__ = [
    "FINAL_FAILURE_WINDOW_S",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "MAX_WINDOW_S",
    "REPLAYED_HEADER",
    "Resend",
    "Resends",
    "window_of",
]

FINAL_FAILURE_WINDOW_S = 10.0
"""How long a failure with no wait of its own is replayed (seconds): past the Vercel AI SDK's default re-sends
(2 s after the answer, then 4 s after that: 6 s), short enough that a caller who fixed something (its quota,
its input) is not held to an old answer."""
MAX_WINDOW_S = 3600.0
"""The longest a failure is remembered (seconds), whatever its Retry-After said."""
MAX_ENTRIES = 10_000
"""The answers remembered at most (the least recently used forgotten first)."""
MAX_BYTES = 32 * 1024 * 1024
"""The bytes of answers remembered at most (an entry's body, headers and an allowance for the entry)."""
REPLAYED_HEADER = "x-sidecar-replayed"
"""On a replayed answer: ``true``."""
_ENTRY_BYTES = 256
"""What an entry costs beyond its body and headers (its key, the record), counted against MAX_BYTES."""
_SIDECAR_HEADER = b"x-sidecar-"
_NEVER = frozenset({FailureKind.JOB_CANCELLED, FailureKind.SYSTEM, FailureKind.STREAM_INTERRUPTED})
_WITH_A_WAIT_ONLY = frozenset({FailureKind.JOB_TIMEOUT})


def window_of(failure: SidecarFailure, final_window_s: float = FINAL_FAILURE_WINDOW_S) -> float | None:
    """How long ``failure``'s answer is replayed to a re-send (seconds); None: not remembered (the module's table)."""
    if failure.kind in _NEVER:
        return None
    detail = failure.detail
    if isinstance(detail, ServiceDetail) and detail.service == SIDECAR_SERVICE:  # shed, draining
        return None
    wait = failure.retry_after
    if wait is not None and math.isfinite(wait):
        return min(wait, MAX_WINDOW_S) if wait > 0 else None
    if failure.kind in _WITH_A_WAIT_ONLY:
        return None
    return final_window_s


@dataclass(frozen=True, slots=True)
class Resend:
    """One request as the memo knows it: its door and its key (the module's "the same request")."""

    route: str
    key: bytes


@dataclass(frozen=True, slots=True)
class _Kept:
    """A failure's answer as it was sent, and until when a re-send gets it again."""

    status: int
    headers: tuple[tuple[str, str], ...]
    content: bytes
    kind: str
    attempts: int
    expires: float

    @property
    def size(self) -> int:
        return len(self.content) + sum(len(k) + len(v) for k, v in self.headers) + _ENTRY_BYTES


class Resends:
    """The memo of the failures the model fronts answered (one for all of them: the key holds the door)."""

    def __init__(
        self,
        clock: Clock,
        *,
        counted: Callable[[str, str], None] | None = None,
        final_window_s: float = FINAL_FAILURE_WINDOW_S,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self._clock = clock
        self._counted = counted
        self._final_window_s = final_window_s
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._secret = os.urandom(32)
        self._kept: OrderedDict[bytes, _Kept] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def resend_of(self, request: Request, route: str, body: bytes, config: int = 0) -> Resend:
        """``request`` (its body read: ``body``) at the door ``route`` as the memo knows it, under the
        ``config``-th config applied (``Live.swaps``: after a reload, nothing answered before is replayed)."""
        digest = hmac.new(self._secret, digestmod="sha256")  # SHA-256: twice BLAKE2b on CPUs with SHA instructions
        peer = request.client.host if request.client is not None else ""
        headers = request.headers
        credential = bearer_token(headers.items()) or headers.get(API_KEY_HEADER) or ""
        envelope = sorted((k.lower(), v) for k, v in headers.raw if k.lower().startswith(_SIDECAR_HEADER))
        parts = [str(config).encode(), peer.encode(), credential.encode("utf-8", "surrogateescape"), route.encode()]
        parts.extend(k + b":" + v for k, v in envelope)
        parts.append(body)
        for part in parts:  # each part's length first: no two requests' parts run together alike
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return Resend(route, digest.digest())

    def replay(self, resend: Resend, span: Span) -> Response | None:
        """The answer ``resend`` got, again (``retry-after`` counted down, ``x-sidecar-replayed``), counted
        and told on ``span``; None when no answer of it is remembered or its window has passed."""
        kept = self._kept.get(resend.key)
        if kept is None:
            return None
        left = kept.expires - self._clock.time()
        if left <= 0:
            self._forget(resend.key)
            return None
        self._kept.move_to_end(resend.key)
        headers = dict(kept.headers)
        if "retry-after" in headers:
            headers["retry-after"] = str(math.ceil(left))
        if "retry-after-ms" in headers:
            headers["retry-after-ms"] = str(round(left * 1000))
        headers[REPLAYED_HEADER] = "true"
        if self._counted is not None:
            self._counted(resend.route, kept.kind)
        replayed(span, kept.kind, kept.attempts, left)
        return Response(kept.content, status_code=kept.status, headers=headers)

    def keep(self, resend: Resend, failure: SidecarFailure, response: Response) -> Response:
        """``response`` (``failure``'s answer to ``resend``), remembered for ``window_of(failure)``."""
        window = window_of(failure, self._final_window_s)
        if window is None:
            return response
        headers = tuple((k, v) for k, v in response.headers.items() if k != "content-length")
        kept = _Kept(
            response.status_code,
            headers,
            bytes(response.body),
            failure.kind_name,
            failure.attempts,
            self._clock.time() + window,
        )
        self._forget(resend.key)
        self._kept[resend.key] = kept
        self._bytes += kept.size
        self._trim()
        return response

    def _forget(self, key: bytes) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._bytes -= kept.size

    def _trim(self) -> None:
        """Forget the least recently used answers past the bounds, and the expired ones at the old end."""
        now = self._clock.time()
        while self._kept:
            key, oldest = next(iter(self._kept.items()))
            if len(self._kept) <= self._max_entries and self._bytes <= self._max_bytes and oldest.expires > now:
                return
            self._forget(key)
