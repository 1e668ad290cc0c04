"""Make text safe to show: no configured secret in any encoding, no key shapes, no account ids.

    mask_secrets(text, secrets)   every configured secret, in every form below, becomes «redacted»
    mask_keys(text, secrets)      mask_secrets, and anything shaped like a key (sk-…, AKIA…, Bearer …)
    redact_body(body, status, …)  mask_keys, account identifiers replaced, blank for 401/403

The forms of a configured secret (``secret_forms``), each masked wherever it appears::

    verbatim              tok"en\\pa/th%zz sp
    percent-decoded       the secret read as a URL-encoded string, when that differs
    percent-encoded       every byte; "/" kept; "+" for space; httpx's path form; either hex case
    escaped               each of the above JSON-escaped (ASCII or not, "\\/" or not) or Python-repr
                          escaped, once or twice (a JSON body quoted in a JSON log line)

Account identifiers: the values of ``ACCOUNT_KEYS`` in JSON (any depth) and in text (``key: v``,
``key=v``, ``"key": "v"``, and ``key v`` when v looks like an id), and free-standing OpenAI-style
ids ``org-…``, ``user-…``, ``proj_…``.

Every pattern here runs over untrusted bodies of up to megabytes, so every one is linear: literal
prefixes, character classes with possessive repeats, no nested or overlapping quantifiers.
``redact_body`` is uncapped; messages cap separately (``text.cap``), after masking, so a cap
never leaves half a secret behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from sidecar.core.json_depth import loads

__all__ = [
    "ACCOUNT_KEYS",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "mask_keys",
    "mask_secrets",
    "redact_body",
    "secret_forms",
]

REDACTED = "«redacted»"
MIN_SECRET_CHARS = 4
"""A configured value shorter than this is not masked (it would mask ordinary words)."""
ACCOUNT_KEYS = frozenset({"user_id", "account_id", "org_id", "organization", "organization_id", "project_id"})
"""Keys whose values identify an account; their values are replaced wherever they appear."""

_HTTPX_PATH_SAFE = "!$%&'()*+,/:;=@[\\]^|"
"""What httpx leaves unencoded in a URL path besides letters, digits and ``-._~`` (a test pins it)."""
_PLAIN = re.compile(r"[A-Za-z0-9._~-]++")
"""Characters no encoding here changes: a run of them is in every form of a secret."""
_HEX = re.compile(r"%[0-9A-F]{2}")
_LONE_SURROGATES = "surrogatepass"
"""How a lone surrogate is percent-encoded (an environment variable's undecodable byte): never an error."""

_KEY_PATTERNS = [
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{8,}+"),  # OpenAI / Anthropic style keys
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{12,}+\b"),  # AWS access keys
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}+"),  # Google API keys
    re.compile(r"\b(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{16,}+"),  # GitHub tokens
    re.compile(r"(?i)\b(bearer)\s++[A-Za-z0-9._\-~+/]{8,}+=*+"),
    re.compile(
        r"(?i)\b((?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|secret|password|x-api-key)\s*+[=:]\s*+)"
        r"[\"']?[A-Za-z0-9._\-~+/]{8,}+"
    ),
]
_ACCOUNT_NAMES = "|".join(sorted(ACCOUNT_KEYS, key=len, reverse=True))
_ACCOUNT_TEXT = re.compile(
    r"(?i)\b(" + _ACCOUNT_NAMES + r")"
    r"(?:([\"']?\s*+[:=]\s*+[\"']?)([^\s\"',}]++)"  # user_id: v, user_id=v, "user_id": "v"
    r"|(\s++)((?=[^\s\"',}]*?[0-9_-])[^\s\"',}]++))"  # user_id user-42 (an id-like value only)
)
_FREE_IDS = re.compile(
    r"\b(?:org-[A-Za-z0-9]{6,}+"  # OpenAI organisation
    r"|proj_[A-Za-z0-9]{6,}+"  # OpenAI project
    r"|user-(?:(?=[A-Za-z]*+[0-9])[A-Za-z0-9]{6,}+|[A-Za-z0-9]{16,}+))\b"  # OpenAI user: a digit, or long
)


def _escapes(text: str) -> set[str]:
    """``text`` as JSON and Python would write it inside a string literal."""
    as_json = json.dumps(text, ensure_ascii=False)[1:-1]
    as_ascii = json.dumps(text)[1:-1]
    return {
        text,
        as_json,
        as_ascii,
        as_json.replace("/", "\\/"),
        as_ascii.replace("/", "\\/"),  # a writer that escapes both: "\/" and "\u007f"
        repr(text)[1:-1],
    }


@lru_cache(maxsize=4096)
def _groups(secret: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(a run every form contains, or "", the forms longest first) for the secret and its decoding."""
    bases = {secret, unquote(secret), unquote_plus(secret)}
    out = []
    for base in sorted(b for b in bases if len(b) >= MIN_SECRET_CHARS):
        urls = {
            base,
            quote(base, safe="", errors=_LONE_SURROGATES),
            quote(base, errors=_LONE_SURROGATES),
            quote_plus(base, errors=_LONE_SURROGATES),
            quote(base, safe=_HTTPX_PATH_SAFE, errors=_LONE_SURROGATES),
        }
        urls |= {_HEX.sub(lambda m: m.group(0).lower(), u) for u in urls}
        forms = {twice for u in urls for once in _escapes(u) for twice in _escapes(once)}
        ordered = tuple(sorted((f for f in forms if len(f) >= MIN_SECRET_CHARS), key=lambda f: (-len(f), f)))
        runs = sorted(_PLAIN.findall(base), key=len, reverse=True)
        core = next((r for r in runs if all(r in f for f in ordered)), "")
        out.append((core, ordered))
    return tuple(out)


def secret_forms(secret: str) -> tuple[str, ...]:
    """Every form of ``secret`` that ``mask_secrets`` masks, longest first."""
    return tuple(sorted({f for _core, forms in _groups(secret) for f in forms}, key=lambda f: (-len(f), f)))


def mask_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every configured secret, in every form (``secret_forms``), replaced by «redacted»."""
    for secret in sorted(secrets, key=len, reverse=True):  # longest first: no shorter secret splits a longer one
        if len(secret) < MIN_SECRET_CHARS:
            continue
        for core, forms in _groups(secret):
            if core not in text:  # the common case, one scan: the secret is not there at all
                continue
            for form in forms:
                if form in text:
                    text = text.replace(form, REDACTED)
    return text


def _mask_shape(m: re.Match[str]) -> str:
    if m.re.groups:
        lead = m.group(1)
        return lead + (" " if lead.lower() == "bearer" else "") + REDACTED
    return REDACTED


def mask_keys(text: str, secrets: Iterable[str] = ()) -> str:
    """Every configured secret masked (``mask_secrets``), and anything that looks like an API key."""
    text = mask_secrets(text, secrets)
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(_mask_shape, text)
    return text


def _account(m: re.Match[str]) -> str:
    if m.group(2) is not None:
        return m.group(1) + m.group(2) + REDACTED
    return m.group(1) + m.group(4) + REDACTED


def _ids(text: str) -> str:
    return _FREE_IDS.sub(REDACTED, _ACCOUNT_TEXT.sub(_account, text))


def redact_body(body: str, status: int | None = None, secrets: Iterable[str] = ()) -> str:
    """A body safe to show: blank for 401/403; account identifiers replaced; secrets and keys masked."""
    if status in (401, 403):
        return ""
    body = mask_secrets(body, secrets)  # first, as sent: no id pattern may take half of a secret
    try:
        text = json.dumps(_redact_json(loads(body)), ensure_ascii=False)
    except ValueError:  # not JSON, or nested too deep to walk (TooDeep): redacted as text
        text = _ids(body)
    return mask_keys(text, secrets)


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {_ids(k): (REDACTED if k.lower() in ACCOUNT_KEYS else _redact_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v) for v in value]
    if isinstance(value, str):
        return _ids(value)
    return value
