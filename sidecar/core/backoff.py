"""How long to wait before the next upstream attempt.

The wait is the provider's Retry-After when it sent a usable one (read afresh on every
attempt), else uniform in the signal's window times the attempt factor::

    wait = uniform(window.min_s, window.max_s) * min(attempt, windows.factor_cap)
    wait = min(wait, windows.max_wait_s)

Retry-After forms honoured (RFC 9110 §10.2.3, plus the OpenAI and Azure headers), the first usable
one in this order: ``retry-after-ms: <digits>`` (OpenAI, Azure OpenAI); ``x-ms-retry-after-ms:
<digits>`` (Azure); ``retry-after: <digits>`` (delay-seconds, 0…2147483647);
``retry-after: <HTTP-date>`` (IMF-fixdate, RFC 850 or asctime). Anything else (negative,
fractional, out of range, garbage) falls back to the window; the raw header is still reported
verbatim.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from sidecar.core.kinds import RetrySignal
from sidecar.core.settings import Window, Windows

__all__ = ["MAX_DELAY_SECONDS", "MS_HEADERS", "parse_retry_after", "retry_after_raw", "signal_window", "window_wait"]

MAX_DELAY_SECONDS = 2147483647
_DIGITS = re.compile(r"^[0-9]+$")
MS_HEADERS = ("retry-after-ms", "x-ms-retry-after-ms")
"""The headers that ask for a wait in milliseconds, read before ``retry-after`` (in this order)."""


def retry_after_raw(headers: Mapping[str, str]) -> str | None:
    """The Retry-After header verbatim, or None when none was sent."""
    return _get(headers, "retry-after")


def parse_retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    """Seconds the server asked us to wait, or None when it asked nothing usable."""
    for name in MS_HEADERS:
        ms = _get(headers, name)
        if ms is not None and (millis := _delay(ms.strip())) is not None:
            return millis / 1000.0
    raw = _get(headers, "retry-after")
    if raw is None:
        return None
    value = raw.strip()
    if _DIGITS.match(value):
        seconds = _delay(value)
        return None if seconds is None else float(seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):  # OverflowError: a year no C long holds
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # the asctime form carries no zone: it is GMT (RFC 9110 §5.6.7)
        when = when.replace(tzinfo=UTC)
    return min(max((when - now).total_seconds(), 0.0), float(MAX_DELAY_SECONDS))


def signal_window(windows: Windows, signal: RetrySignal) -> Window:
    """The window of a retry signal: rate limit, overload, or (anything else) transient."""
    if signal is RetrySignal.RATE_LIMIT:
        return windows.rate_limit
    if signal is RetrySignal.OVERLOAD:
        return windows.overload
    return windows.transient


def window_wait(window: Window, attempt: int, windows: Windows, rng: random.Random) -> float:
    """A jittered wait that grows with the attempt (1-based)."""
    factor = min(max(attempt, 1), windows.factor_cap)
    wait = rng.uniform(window.min_s, window.max_s) * factor
    return min(wait, windows.max_wait_s)


def _delay(value: str) -> int | None:
    """``value`` as a delay in 0…MAX_DELAY_SECONDS, or None: not digits, or out of range (read without
    converting a long run of digits, which int() refuses past 4300 of them)."""
    if not _DIGITS.match(value):
        return None
    digits = value.lstrip("0") or "0"
    if len(digits) > len(str(MAX_DELAY_SECONDS)):
        return None
    number = int(digits)
    return number if number <= MAX_DELAY_SECONDS else None


def _get(headers: Mapping[str, str], name: str) -> str | None:
    got = headers.get(name)
    if got is not None:
        return got
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
