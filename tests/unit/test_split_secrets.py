"""SplitSecrets: a configured secret written across any cut of a stream's text never goes out whole,
nor its remainder past the few characters of its format prefix; text without one goes out unchanged."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from sidecar.core.redact import REDACTED
from sidecar.core.split_secrets import HOLD_FROM, SplitSecrets

KEY = "sk-test-SECRETKEY1234567890"
OTHER = "tok_4f9c2e8a7b1d"
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz sk-.,:", max_size=40)


def cut(text: str, points: list[int]) -> list[str]:
    marks = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(marks)]


def through(chunks: list[str], secrets: tuple[str, ...] = (KEY, OTHER)) -> list[str]:
    guard = SplitSecrets(secrets)
    out = [guard.feed(c) for c in chunks]
    out.append(guard.flush())
    return out


@given(before=WORDS, after=WORDS, points=st.lists(st.integers(min_value=0, max_value=200), max_size=30))
def test_a_secret_across_any_cut_never_goes_out(before: str, after: str, points: list[int]) -> None:
    for secret in (KEY, OTHER):
        sent = "".join(through(cut(before + secret + after, points)))
        for start in range(HOLD_FROM):  # not whole, nor all but its first HOLD_FROM - 1 characters
            assert secret[start:] not in sent
        assert REDACTED in sent


@given(text=WORDS, points=st.lists(st.integers(min_value=0, max_value=200), max_size=30))
def test_text_without_a_secret_goes_out_unchanged(text: str, points: list[int]) -> None:
    assert "".join(through(cut(text, points))) == text


def test_ordinary_deltas_are_not_held() -> None:
    deltas = ["You", " said:", " desks", " sk", "is", " and", " task-", "s"]
    assert through(deltas)[:-1] == deltas  # tails shorter than HOLD_FROM, or no secret's start


def test_a_secret_being_written_is_held_until_it_is_whole() -> None:
    guard = SplitSecrets([KEY])
    assert guard.feed("key: sk-te") == "key: "
    assert guard.feed("st-SECRET") == ""
    assert guard.feed("KEY1234567890 ok") == f"{REDACTED} ok"
    assert guard.flush() == ""


def test_held_text_that_turns_out_to_be_no_secret_goes_out_with_the_next_delta() -> None:
    guard = SplitSecrets([KEY])
    assert guard.feed("a sk-te") == "a "
    assert guard.feed("a party") == "sk-tea party"


def test_without_secrets_nothing_is_held() -> None:
    guard = SplitSecrets([])
    assert not guard.active
    assert guard.feed("sk-te") == "sk-te"
