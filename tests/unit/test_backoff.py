"""sidecar.core.backoff: Retry-After in every form, the signal windows and the jittered growing wait."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.core.backoff import MAX_DELAY_SECONDS, parse_retry_after, retry_after_raw, signal_window, window_wait
from sidecar.core.kinds import RetrySignal
from sidecar.core.settings import MAX_WAIT_S, Window, Windows
from tests.unit.profile import PROPERTY

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IMF = "%a, %d %b %Y %H:%M:%S GMT"


def after(headers: dict[str, str], now: datetime = NOW) -> float | None:
    return parse_retry_after(headers, now)


# ---------------------------------------------------------------- the raw header


def test_the_raw_header_is_returned_verbatim_whatever_its_name_case() -> None:
    assert retry_after_raw({"Retry-After": "  in 3 s, or so "}) == "  in 3 s, or so "
    assert retry_after_raw({"RETRY-AFTER": "7"}) == "7"
    assert retry_after_raw({"retry-after-ms": "7"}) is None  # the OpenAI header is not the raw Retry-After
    assert retry_after_raw({}) is None


# ---------------------------------------------------------------- delay-seconds and milliseconds


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("  12 \t", 12.0),  # surrounding whitespace is not part of the value
        ("007", 7.0),
        (str(MAX_DELAY_SECONDS), float(MAX_DELAY_SECONDS)),  # the largest delay RFC 9110 allows
    ],
)
def test_delay_seconds_are_the_wait(value: str, seconds: float) -> None:
    assert after({"retry-after": value}) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "-1",  # negative
        "1.5",  # fractional
        "+5",
        "1e3",
        "0x10",
        "1_000",
        "1 000",
        "１２",  # digits, but not ASCII ones (int() would read them)
        str(MAX_DELAY_SECONDS + 1),  # out of range
        "9" * 5000,  # out of range, and longer than int() reads by default
        "",
        "   ",
        "soon",
        "\x00",
        "7s",
    ],
)
def test_a_value_that_is_no_delay_and_no_date_asks_nothing(value: str) -> None:
    assert after({"retry-after": value}) is None


def test_no_header_asks_nothing() -> None:
    assert after({}) is None
    assert after({"x-ratelimit-reset": "5"}) is None


def test_the_header_name_is_read_in_any_case() -> None:
    assert after({"Retry-After": "3"}) == 3.0
    assert after({"RETRY-AFTER-MS": "250"}) == 0.25


@pytest.mark.parametrize(
    ("ms", "seconds"),
    [("1500", 1.5), ("0", 0.0), (" 250 ", 0.25), (str(MAX_DELAY_SECONDS), MAX_DELAY_SECONDS / 1000)],
)
def test_retry_after_ms_alone_is_the_wait_in_milliseconds(ms: str, seconds: float) -> None:
    assert after({"retry-after-ms": ms}) == seconds


def test_a_usable_retry_after_ms_wins_over_retry_after() -> None:
    assert after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert after({"Retry-After": "9", "Retry-After-Ms": "250"}) == 0.25  # whatever the order and case
    assert after({"retry-after-ms": "0", "retry-after": "9"}) == 0.0


def test_azures_x_ms_retry_after_ms_is_read_after_retry_after_ms_and_before_retry_after() -> None:
    assert after({"x-ms-retry-after-ms": "1250"}) == 1.25
    assert after({"X-Ms-Retry-After-Ms": "1250", "retry-after": "9"}) == 1.25
    assert after({"retry-after-ms": "250", "x-ms-retry-after-ms": "1250"}) == 0.25
    assert after({"retry-after-ms": "soon", "x-ms-retry-after-ms": "1250"}) == 1.25
    assert after({"x-ms-retry-after-ms": "-1", "retry-after": "9"}) == 9.0


@pytest.mark.parametrize("ms", ["-1", "1.5", "soon", "", str(MAX_DELAY_SECONDS + 1), "9" * 5000, "２"])
def test_an_unusable_retry_after_ms_falls_back_to_retry_after(ms: str) -> None:
    assert after({"retry-after-ms": ms, "retry-after": "9"}) == 9.0
    assert after({"retry-after-ms": ms}) is None


# ---------------------------------------------------------------- HTTP dates


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("Thu, 01 Jan 2026 00:00:42 GMT", 42.0),  # IMF-fixdate
        ("Thursday, 01-Jan-26 00:00:42 GMT", 42.0),  # RFC 850
        ("Thu Jan  1 00:00:42 2026", 42.0),  # asctime: no zone, read as GMT
        ("Thu, 01 Jan 2026 01:00:42 +0100", 42.0),  # a numeric zone is honoured
        ("Thu, 01 Jan 2026 00:00:42 -0000", 42.0),  # "-0000": no zone information, GMT
        ("Fri, 02 Jan 2026 00:00:00 GMT", 86400.0),
    ],
)
def test_a_date_in_the_future_is_the_seconds_until_it(value: str, seconds: float) -> None:
    assert after({"retry-after": value}) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "Wed, 31 Dec 2025 23:00:00 GMT",
        "Wednesday, 31-Dec-25 23:00:00 GMT",
        "Wed Dec 31 23:00:00 2025",
        "Thu, 01 Jan 2026 00:00:00 GMT",  # exactly now
        "Mon, 01 Jan 1900 00:00:00 GMT",
    ],
)
def test_a_date_in_the_past_means_now(value: str) -> None:
    assert after({"retry-after": value}) == 0.0


def test_a_date_past_the_largest_delay_is_the_largest_delay() -> None:
    assert after({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}) == float(MAX_DELAY_SECONDS)


def test_the_date_is_read_against_the_wall_clock_given() -> None:
    later = NOW + timedelta(seconds=40)
    assert after({"retry-after": "Thu, 01 Jan 2026 00:00:42 GMT"}, later) == 2.0


@pytest.mark.parametrize(
    "value",
    [
        "Thu, 99 Foo 2026",
        "Thu, 01 Jan 2026 25:00:00 GMT",  # no such hour
        "Thu, 01 Jan 2026 00:00:00 +9999",  # a zone more than a day off
        "Thu, 01 Jan 99999999999999999999 00:00:00 GMT",  # a year no datetime holds
        "Thu, 01 Jan 10000 00:00:00 GMT",
        "Jan 1 2026",
    ],
)
def test_a_date_that_cannot_be_read_asks_nothing(value: str) -> None:
    assert after({"retry-after": value}) is None


# ---------------------------------------------------------------- any header value: no exception, a bounded result


def _http_date() -> st.SearchStrategy[str]:
    """Strings shaped like the three date forms, with any numbers in the fields (huge years, bad zones)."""
    number = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.integers(min_value=0, max_value=99))
    day = st.sampled_from(["Mon", "Thu", "Thursday", "Xyz", ""])
    month = st.sampled_from(["Jan", "Dec", "Foo", ""])
    zone = st.one_of(st.sampled_from(["GMT", "UTC", "-0000", "+0100", "+9999", "EST", ""]), number.map(str))
    return st.one_of(
        st.builds(lambda d, n, m, y, h, z: f"{d}, {n} {m} {y} {h}:00:00 {z}", day, number, month, number, number, zone),
        st.builds(lambda d, n, m, y, z: f"{d}, {n}-{m}-{y} 00:00:00 {z}", day, number, month, number, zone),
        st.builds(lambda d, m, n, y: f"{d} {m} {n} 00:00:00 {y}", day, month, number, number),
    )


_VALUE = st.one_of(
    st.text(max_size=60),
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.from_regex(r"\A\s*[0-9]{1,30}\s*\Z"),
    _http_date(),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.strftime(IMF)),
)
_NOW = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))


@PROPERTY
@given(
    retry_after=st.none() | _VALUE,
    retry_after_ms=st.none() | _VALUE,
    now=_NOW,
    upper=st.booleans(),
)
def test_any_header_values_give_no_exception_and_a_wait_within_range(
    retry_after: str | None, retry_after_ms: str | None, now: datetime, upper: bool
) -> None:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["Retry-After" if upper else "retry-after"] = retry_after
    if retry_after_ms is not None:
        headers["Retry-After-Ms" if upper else "retry-after-ms"] = retry_after_ms
    got = parse_retry_after(headers, now)
    assert got is None or 0.0 <= got <= MAX_DELAY_SECONDS
    if retry_after is None and retry_after_ms is None:
        assert got is None


@PROPERTY
@given(when=st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31)), now=_NOW)
def test_every_imf_fixdate_is_the_seconds_until_it_clipped_to_range(when: datetime, now: datetime) -> None:
    when = when.replace(microsecond=0, tzinfo=UTC)
    expected = min(max((when - now).total_seconds(), 0.0), float(MAX_DELAY_SECONDS))
    assert after({"retry-after": when.strftime(IMF)}, now) == expected


@PROPERTY
@given(seconds=st.integers(min_value=0, max_value=MAX_DELAY_SECONDS), zone=st.integers(min_value=-1439, max_value=1439))
def test_a_date_in_any_zone_is_the_same_instant(seconds: int, zone: int) -> None:
    when = NOW + timedelta(seconds=seconds % (86400 * 365 * 50))
    local = when.astimezone(timezone(timedelta(minutes=zone)))
    assert after({"retry-after": local.strftime("%a, %d %b %Y %H:%M:%S %z")}) == (when - NOW).total_seconds()


# ---------------------------------------------------------------- the windows


def test_each_signal_has_its_window_and_anything_else_is_transient() -> None:
    windows = Windows()
    assert signal_window(windows, RetrySignal.RATE_LIMIT) == windows.rate_limit
    assert signal_window(windows, RetrySignal.OVERLOAD) == windows.overload
    assert signal_window(windows, RetrySignal.TRANSIENT) == windows.transient
    assert signal_window(windows, RetrySignal.UNSPECIFIED) == windows.transient


WIDE = Windows(rate_limit=Window(min_s=5, max_s=30), factor_cap=3, max_wait_s=MAX_WAIT_S)


@pytest.mark.parametrize(("attempt", "factor"), [(1, 1), (2, 2), (3, 3), (4, 3), (1000, 3)])
def test_the_wait_grows_with_the_attempt_up_to_the_factor_cap(attempt: int, factor: int) -> None:
    rng = random.Random(7)
    waits = [window_wait(WIDE.rate_limit, attempt, WIDE, rng) for _ in range(200)]
    assert all(5 * factor <= w <= 30 * factor for w in waits)
    assert max(waits) > 25 * factor  # jittered over the whole window, not a fixed point
    assert min(waits) < 10 * factor


@pytest.mark.parametrize("attempt", [0, -1, -(10**9)])
def test_an_attempt_below_one_counts_as_the_first(attempt: int) -> None:
    assert window_wait(WIDE.rate_limit, attempt, WIDE, random.Random(3)) == window_wait(
        WIDE.rate_limit, 1, WIDE, random.Random(3)
    )


def test_no_wait_is_longer_than_max_wait() -> None:
    windows = Windows(overload=Window(min_s=100, max_s=200), factor_cap=10, max_wait_s=150)
    rng = random.Random(1)
    assert window_wait(windows.overload, 1, windows, rng) <= 150
    assert [window_wait(windows.overload, 5, windows, rng) for _ in range(20)] == [150.0] * 20


def test_a_point_window_is_exact() -> None:
    windows = Windows(transient=Window(min_s=2, max_s=2), factor_cap=4)
    assert [window_wait(windows.transient, n, windows, random.Random()) for n in (1, 2, 3, 4, 5)] == [2, 4, 6, 8, 8]


def test_the_same_seed_gives_the_same_waits() -> None:
    def waits(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [window_wait(WIDE.rate_limit, n, WIDE, rng) for n in range(1, 10)]

    assert waits(11) == waits(11)
    assert waits(11) != waits(12)


_SECONDS = st.floats(min_value=0, max_value=MAX_WAIT_S, allow_nan=False)


@st.composite
def _windows(draw: st.DrawFn) -> Windows:
    low, high = sorted((draw(_SECONDS), draw(_SECONDS)))
    return Windows(
        transient=Window(min_s=low, max_s=high),
        factor_cap=draw(st.integers(min_value=1, max_value=100)),
        max_wait_s=draw(_SECONDS),
    )


@PROPERTY
@given(windows=_windows(), attempt=st.integers(min_value=1, max_value=10**9), seed=st.integers())
def test_any_wait_is_within_the_grown_window_and_max_wait(windows: Windows, attempt: int, seed: int) -> None:
    window = windows.transient
    factor = min(attempt, windows.factor_cap)
    wait = window_wait(window, attempt, windows, random.Random(seed))
    # min_s x factor <= wait <= max_s x factor, then cut at max_wait_s (which may be below min_s x factor)
    assert min(window.min_s * factor, windows.max_wait_s) <= wait <= min(window.max_s * factor, windows.max_wait_s)
