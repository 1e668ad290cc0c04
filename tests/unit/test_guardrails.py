"""sidecar.tools.guardrails: which arguments a rule reads, what a refusal says, which rule refuses first."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.config import GuardrailConfig
from sidecar.core.details import InvalidInputDetail
from sidecar.core.kinds import FailureKind
from sidecar.core.taxonomy import Guardrail
from sidecar.core.text import ECHO_CHARS
from sidecar.tools.guardrails import Guardrails
from tests.unit.profile import PROPERTY

EMAIL = r"[\w.+-]+@[\w-]+\.\w+"
PII = GuardrailConfig(name="pii", deny_pattern=EMAIL, reason="must not contain an email address; remove it")


def refusal(rules: list[GuardrailConfig], arguments: dict[str, Any]) -> Guardrail:
    with pytest.raises(Guardrail) as caught:
        Guardrails(rules).check(arguments)
    return caught.value


def test_no_rule_refuses_nothing() -> None:
    Guardrails([]).check({"q": "me@example.org"})


def test_a_rule_refuses_a_matching_argument_with_a_correctable_guardrail_failure() -> None:
    failure = refusal([PII], {"query": "write to bob@example.com please"})
    assert failure.kind is FailureKind.GUARDRAIL
    assert failure.correctable
    assert failure.message == (
        "The pii guardrail refused the call: 'query' must not contain an email address; remove it"
    )
    assert failure.detail == InvalidInputDetail(
        parameter="pii",
        value="write to bob@example.com please",
        rule="'query' must not contain an email address; remove it",
    )


def test_arguments_that_do_not_match_pass() -> None:
    Guardrails([PII]).check({"query": "no address here", "n": 3, "at": "@", "nested": {"list": ["a@b"]}})


def test_without_a_parameter_every_string_is_read_nested_and_named_by_its_path() -> None:
    failure = refusal([PII], {"q": "fine", "filters": {"authors": ["x", "me@example.org"], "year": 2020}})
    assert failure.message.startswith("The pii guardrail refused the call: 'filters.authors[1]' must")
    deep = refusal([PII], {"a": [[{"b": ["c@d.ef"]}]]})
    assert "'a[0][0].b[0]'" in deep.message


def test_a_rule_with_a_parameter_reads_only_that_argument() -> None:
    rule = GuardrailConfig(name="pii", parameter="query", deny_pattern=EMAIL, reason="no email")
    Guardrails([rule]).check({"query": "clean", "notes": "me@example.org"})
    assert "'query'" in refusal([rule], {"query": "me@example.org", "notes": "clean"}).message
    assert "'query.to[0]'" in refusal([rule], {"query": {"to": ["me@example.org"]}}).message
    Guardrails([rule]).check({"notes": "me@example.org"})  # the argument is absent: nothing to read


@pytest.mark.parametrize("value", [42, 3.5, True, None, [], {}, [1, 2], {"n": 0}])
def test_values_that_are_not_strings_are_never_matched(value: Any) -> None:
    Guardrails([GuardrailConfig(name="any", deny_pattern=r".", reason="r")]).check({"v": value})


def test_the_first_rule_in_order_refuses_first() -> None:
    digits = GuardrailConfig(name="digits", deny_pattern=r"\d", reason="no digits")
    assert refusal([PII, digits], {"q": "a1 me@example.org"}).message.startswith("The pii guardrail")
    assert refusal([digits, PII], {"q": "a1 me@example.org"}).message.startswith("The digits guardrail")


def test_within_a_rule_the_first_string_in_argument_order_refuses() -> None:
    failure = refusal([PII], {"first": "a@b.cd", "second": "e@f.gh"})
    assert "'first'" in failure.message
    assert isinstance(failure.detail, InvalidInputDetail)
    assert failure.detail.value == "a@b.cd"


def test_a_pattern_is_searched_anywhere_not_matched_whole() -> None:
    rule = GuardrailConfig(name="drop", deny_pattern=r"(?i)drop\s+table", reason="no SQL")
    refusal([rule], {"q": "please DROP   TABLE users;"})
    anchored = GuardrailConfig(name="start", deny_pattern=r"^rm ", reason="r")
    Guardrails([anchored]).check({"cmd": "echo rm -rf"})
    refusal([anchored], {"cmd": "rm -rf /"})


def test_word_classes_are_ascii_as_in_re2() -> None:
    rule = GuardrailConfig(name="w", deny_pattern=r"^\w+$", reason="r")
    refusal([rule], {"q": "abc_123"})
    Guardrails([rule]).check({"q": "héllo"})  # é is not \w on RE2


def test_a_long_refused_value_is_echoed_bounded_with_its_length() -> None:
    value = "x" * 5000 + " me@example.org"
    failure = refusal([PII], {"q": value})
    assert isinstance(failure.detail, InvalidInputDetail)
    assert failure.detail.value == "x" * ECHO_CHARS + f"… ({len(value)} characters)"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="abc xyz.", max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="abc", max_size=4), inner, max_size=3),
    max_leaves=8,
)


@PROPERTY
@given(arguments=st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=4), _JSON, max_size=4), where=st.data())
def test_an_email_anywhere_in_any_arguments_is_refused_and_none_is_not(arguments: dict[str, Any], where: Any) -> None:
    rules = Guardrails([PII])
    rules.check(arguments)  # the alphabet holds no "@": nothing to refuse
    key = where.draw(st.text(alphabet="abc", min_size=1, max_size=4))
    planted = {**arguments, key: [{"deep": ["x", "someone@example.org"]}]}
    with pytest.raises(Guardrail):
        rules.check(planted)
