"""Make upstream bodies safe to show: no account identifiers, no keys, nothing of a 401/403.

``redact_body`` is applied to every body that leaves the sidecar (``http.body``, messages,
logs, spans). It is uncapped; messages cap separately (``text.cap``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "«redacted»"
ACCOUNT_KEYS = frozenset({"user_id", "account_id", "org_id", "organization", "organization_id", "project_id"})
"""Keys whose values identify an account; their values are replaced wherever they appear."""

_KEY_PATTERNS = [
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{8,}"),  # OpenAI / Anthropic style keys
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{12,}\b"),  # AWS access keys
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),  # Google API keys
    re.compile(r"\b(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{16,}"),  # GitHub tokens
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._\-~+/]{8,}=*"),
    re.compile(
        r"(?i)\b((?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|secret|password|x-api-key)\s*[=:]\s*)[\"']?[A-Za-z0-9._\-~+/]{8,}"
    ),
]
_ACCOUNT_TEXT = re.compile(
    r"(?i)\b(" + "|".join(sorted(ACCOUNT_KEYS, key=len, reverse=True)) + r")([\"']?\s*[:=]\s*[\"']?)([^\s\"',}]+)"
)
_OPENAI_ORG = re.compile(r"\borg-[A-Za-z0-9]{6,}\b")


def mask_keys(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask anything that looks like an API key, and every configured secret verbatim."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    for pattern in _KEY_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + (" " if m.group(1).lower() == "bearer" else "") + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def redact_body(body: str, status: int | None = None, secrets: Iterable[str] = ()) -> str:
    """A body safe to show: blank for 401/403; account identifiers replaced; keys masked."""
    if status in (401, 403):
        return ""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        text = _ACCOUNT_TEXT.sub(lambda m: m.group(1) + m.group(2) + REDACTED, body)
    else:
        text = json.dumps(_redact_json(parsed), ensure_ascii=False)
    text = _OPENAI_ORG.sub(REDACTED, text)
    return mask_keys(text, secrets)


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if k.lower() in ACCOUNT_KEYS else _redact_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v) for v in value]
    if isinstance(value, str):
        return _ACCOUNT_TEXT.sub(lambda m: m.group(1) + m.group(2) + REDACTED, value)
    return value
