"""sidecar.core.redact and text.endpoint_of: what tests/processes/test_secrets.py does not already pin.

tests/processes/test_secrets.py holds the properties per encoding (JSON, percent, repr, httpx's path form)
and the hostile megabyte bodies. Here: the plain property in its simplest form (a configured
secret, as it is, never survives whatever text surrounds it, through every masking function),
the key shapes, account ids in JSON and in text, and the 401/403 blanking.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sidecar.core.redact import ACCOUNT_KEYS, MIN_SECRET_CHARS, REDACTED, mask_keys, mask_secrets, redact_body
from sidecar.core.text import endpoint_of
from tests.unit.profile import PROPERTY

# ---------------------------------------------------------------- a configured secret never survives

_SECRET = st.text(alphabet=st.characters(exclude_characters="«»"), min_size=MIN_SECRET_CHARS, max_size=30)
_AROUND = st.text(max_size=60)


def _every_mask(text: str, secrets: list[str]) -> dict[str, str]:
    return {
        "mask_secrets": mask_secrets(text, secrets),
        "mask_keys": mask_keys(text, secrets),
        "redact_body": redact_body(text, None, secrets),
        "redact_body 500": redact_body(text, 500, secrets),
        "redact_body as JSON": redact_body(json.dumps({"error": {"message": text}}), 400, secrets),
        "endpoint_of": endpoint_of("https://h/" + text, secrets),
    }


@PROPERTY
@given(secret=_SECRET, before=_AROUND, middle=_AROUND, after=_AROUND, others=st.lists(_SECRET, max_size=2))
def test_a_configured_secret_never_survives_whatever_text_surrounds_it(
    secret: str, before: str, middle: str, after: str, others: list[str]
) -> None:
    assume(secret not in REDACTED)  # "dact" is in every «redacted» marker: no masking can remove it
    text = before + secret + middle + secret + after
    for where, out in _every_mask(text, [*others, secret]).items():
        assert secret not in out, where
        if where != "endpoint_of":  # which may have cut the secret off with the query or fragment instead
            assert REDACTED in out, where


def test_a_secret_holding_an_undecodable_byte_of_the_environment_is_masked() -> None:
    """On POSIX an environment variable's byte that is not UTF-8 reads as a lone surrogate (surrogateescape)."""
    secret = b"tok-\xe9-value".decode("utf-8", "surrogateescape")
    for where, out in _every_mask(f"key={secret}; json={json.dumps(secret)}", [secret]).items():
        assert secret not in out, where
        assert "\\udce9" not in out, where


@PROPERTY
@given(secret=_SECRET, text=_AROUND)
def test_masking_is_idempotent(secret: str, text: str) -> None:
    once = mask_keys(text, [secret])
    assert mask_keys(once, [secret]) == once


@pytest.mark.parametrize("short", ["", "a", "ab", "abc"])
def test_a_configured_value_shorter_than_four_characters_is_not_masked(short: str) -> None:
    assert mask_secrets("a b abc abcd", [short]) == "a b abc abcd"


def test_a_secret_inside_a_longer_secret_leaves_nothing_of_either() -> None:
    text = "long: abcd-efgh-ijkl, short: abcd-efgh"
    for secrets in (["abcd-efgh", "abcd-efgh-ijkl"], ["abcd-efgh-ijkl", "abcd-efgh"]):
        out = mask_secrets(text, secrets)
        assert "abcd" not in out
        assert "ijkl" not in out


# ---------------------------------------------------------------- key shapes (no secret configured)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("key sk-abcdefgh1234 here", f"key {REDACTED} here"),
        ("sk-ant-api03-abcdefghijk", REDACTED),
        ("sk-proj-abcdefghijkl", REDACTED),
        ("AKIAABCDEFGHIJKL", REDACTED),
        ("ASIAABCDEFGHIJKL", REDACTED),
        ("AIza" + "b" * 25, REDACTED),
        ("ghp_" + "c" * 20, REDACTED),
        ("github_pat_" + "d" * 20, REDACTED),
        ("Authorization: Bearer abc.def-ghi_jkl", f"Authorization: Bearer {REDACTED}"),
        ("authorization: bearer\tabcdefgh==", f"authorization: bearer {REDACTED}"),
        ("api_key=abcdefgh12", f"api_key={REDACTED}"),
        ("x-api-key: 'abcdefghij'", f"x-api-key: {REDACTED}'"),
        ("password = hunter2hunter2", f"password = {REDACTED}"),
        ("ACCESS-TOKEN=abcdefghijklm", f"ACCESS-TOKEN={REDACTED}"),
    ],
)
def test_key_shaped_tokens_are_masked(text: str, masked: str) -> None:
    assert mask_keys(text) == masked


@pytest.mark.parametrize(
    "text", ["sk-short", "AKIAabc", "a task-list item", "bearer tok", "secret:abc", "the api key is missing"]
)
def test_ordinary_text_that_only_resembles_a_key_is_kept(text: str) -> None:
    assert mask_keys(text) == text


# ---------------------------------------------------------------- account ids in JSON


def test_account_keys_in_json_are_replaced_at_any_depth_whatever_their_value_or_case() -> None:
    body = {
        "User_ID": 42,
        "items": [{"account_id": {"nested": "object"}}, {"organization": "Acme Research Lab"}],
        "org_id": None,
        "error": {"message": "fine", "project_id": ["p1", "p2"], "organization_id": "o-1"},
        "keep": {"user": "named", "id": 7},
    }
    out = json.loads(redact_body(json.dumps(body), 400))
    assert out == {
        "User_ID": REDACTED,
        "items": [{"account_id": REDACTED}, {"organization": REDACTED}],
        "org_id": REDACTED,
        "error": {"message": "fine", "project_id": REDACTED, "organization_id": REDACTED},
        "keep": {"user": "named", "id": 7},
    }


def test_ids_in_json_keys_and_strings_are_replaced() -> None:
    body = {"org-AbCdEf123456": "v", "msg": "organization=acme-1 for user-9f8e7d6c and proj_AbCdEf99"}
    out = json.loads(redact_body(json.dumps(body), 500))
    assert out == {REDACTED: "v", "msg": f"organization={REDACTED} for {REDACTED} and {REDACTED}"}


def test_an_id_inside_json_quoted_in_json_is_replaced() -> None:
    inner = json.dumps({"account_id": "acct-42", "message": "over limit"})
    out = redact_body(json.dumps({"error": inner}), 429)
    assert "acct-42" not in out
    assert REDACTED in out


_PLAIN_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8).filter(
    lambda k: k not in ACCOUNT_KEYS
)
_PLAIN_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="abcdefghij XYZ.,!", max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_PLAIN_KEY, inner, max_size=4),
    max_leaves=10,
)


@PROPERTY
@given(value=_PLAIN_JSON)
def test_json_with_no_id_and_no_secret_keeps_its_meaning(value: Any) -> None:
    assert json.loads(redact_body(json.dumps(value), 500, ["Zq9-unrelated"])) == value


# ---------------------------------------------------------------- account ids in text


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("org_id='o-42' and more", f"org_id='{REDACTED}' and more"),
        ("organization: Acme", f"organization: {REDACTED}"),
        ("Organization_ID = 1234", f"Organization_ID = {REDACTED}"),
        ('log: {"account_id": "acct_12", "n": 1}', f'log: {{"account_id": "{REDACTED}", "n": 1}}'),
        ('{"organization_id": "o1", "truncated', f'{{"organization_id": "{REDACTED}", "truncated'),  # not JSON
        ("user_id  u_1 denied", f"user_id  {REDACTED} denied"),
        ("for org org-AbCdEf12", f"for org {REDACTED}"),
    ],
)
def test_account_ids_in_text_are_replaced(text: str, redacted: str) -> None:
    assert redact_body(text, 500) == redacted


@pytest.mark.parametrize("text", ["the account_id field is required", "project_id missing", "org-wide", "user-facing"])
def test_id_names_without_an_id_are_kept(text: str) -> None:
    assert redact_body(text, 500) == text


# ---------------------------------------------------------------- 401 / 403 blanking


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize(
    "body", ["", "Unauthorized", '{"error": {"message": "bad key sk-abcdefghijkl"}}', "x" * 10_000]
)
def test_a_401_or_403_body_is_blanked(status: int, body: str) -> None:
    assert redact_body(body, status) == ""
    assert redact_body(body, status, ["Zq9-secret"]) == ""


@pytest.mark.parametrize("status", [None, 200, 400, 402, 404, 407, 429, 500])
def test_no_other_status_blanks_the_body(status: int | None) -> None:
    assert redact_body("quota exceeded", status) == "quota exceeded"


# ---------------------------------------------------------------- endpoints


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.example/v1/chat", "https://api.example/v1/chat"),
        ("https://api.example/v1/chat?api_key=abc#x", "https://api.example/v1/chat"),
        ("https://h/x#frag?q=1", "https://h/x"),
        ("https://user@h/x", f"https://{REDACTED}@h/x"),
        ("https://u:p@h:8443/x?y", f"https://{REDACTED}@h:8443/x"),
        ("https://h/x/ghp_abcdefghijklmnopqrst/y", f"https://h/x/{REDACTED}/y"),
        ("https://h/x?q=user@example.org", "https://h/x"),  # an @ in the query is no userinfo
    ],
)
def test_an_endpoint_is_shown_without_credentials_query_or_fragment(url: str, shown: str) -> None:
    assert endpoint_of(url) == shown
