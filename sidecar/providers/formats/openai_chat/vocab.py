"""The OpenAI Chat Completions vocabulary both halves share: finishes, markers, tools, keys, errors.

    finish_reason (wire)        FinishReason (core)      rendered back as
    stop                        STOP                     stop
    length                      LENGTH                   length
    tool_calls, function_call   TOOL_CALLS               tool_calls
    content_filter              CONTENT_FILTER           content_filter (a refusal: stop, with message.refusal)

A content-policy refusal (``error_refusal``, ``filtered_categories``): an error answer or a stream's
error event, whatever its status, is PROVIDER_REFUSAL, never retried, when it says so::

    error body                                              category (the refusal's)
    {"error": {"code": "content_policy_violation"}}         content_policy_violation (OpenAI)
    {"error": {"code": "content_filter", "innererror":      the categories of innererror.content_filter_result
      {"code": "ResponsibleAIPolicyViolation",              with "filtered": true, comma-separated (hate,
       "content_filter_result": {"hate": {"filtered":       sexual, violence, self_harm, jailbreak ...), else
       true, "severity": "high"}, ...}}}}                   content_filter (Azure OpenAI)
    {"error": {"code": "invalid_prompt", "message":         invalid_prompt (OpenAI's reasoning models)
      "... flagged as potentially violating our usage
      policy ..."}}

A reply (or a stream's chunk) that finishes ``content_filter`` is a refusal too; Azure names the
categories in ``choices[].content_filter_results`` (and the prompt's in ``prompt_filter_results``),
read the same way.

The rate-limit headers of every answer (``rate_budget``, for ``core.rate_budget``; Azure OpenAI sends the
same names, its resets sometimes left out)::

    x-ratelimit-remaining-requests: 4     Budget.requests  Allowance(4, reset_s)
    x-ratelimit-reset-requests: 6m0s        a duration: 1h2m3.5s, 6m0s, 1s, 20ms, 250us (reset_s in seconds)
    x-ratelimit-remaining-tokens,         Budget.tokens    the same
      x-ratelimit-reset-tokens
    a count that is not digits, a reset   that budget not told (a reset not read: None)
      that is not a duration

A tool result that is an error has ``TOOL_ERROR_PREFIX`` before its content (the wire has no
is_error flag); a stream ends with ``END_MARKER``. The key goes in ``authorization: Bearer``.

A tool message carries text only: a tool result's images go in one user message after the turn's
tool messages, each where it stood marked in its tool message by ``tool_image_placeholder(n)`` and
labelled in the user message by ``tool_image_label(n, call_id)`` (``upstream.py``'s rule).
Binary content (an image, a PDF) travels as a ``data:`` URL (``formats.inline``).

A reasoning budget (``Reasoning.budget_tokens``) is sent as the ``reasoning_effort`` level of
``effort_for_budget``::

    budget_tokens           reasoning_effort
    below 1,024             minimal
    1,024 to 4,095          low
    4,096 to 16,383         medium
    16,384 and above        high
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sidecar.core.json_depth import loads
from sidecar.core.kinds import FinishReason
from sidecar.core.rate_budget import Allowance, Budget
from sidecar.providers.formats.chat import EMPTY_PARAMETERS

__all__ = [
    "API_KEY_HEADER",
    "DEFAULT_FILENAME",
    "END_MARKER",
    "ERROR_TYPES",
    "FINISH",
    "FINISH_NAMES",
    "FORMAT_NAME",
    "MAX_STOP",
    "RATE_LIMIT_HEADERS",
    "REFUSAL_CODES",
    "TOOL_ERROR_PREFIX",
    "api_key_of",
    "effort_for_budget",
    "error_refusal",
    "filtered_categories",
    "parse_duration",
    "rate_budget",
    "render_tool",
    "tool_image_label",
    "tool_image_labelled",
    "tool_image_placeholder",
    "tool_image_slot",
]

FORMAT_NAME = "openai"
"""The format's name in the configuration (``providers[].wire_format``)."""

TOOL_ERROR_PREFIX = "[tool error] "
"""Before the content of a tool result that is an error: the OpenAI wire has no is_error flag."""
END_MARKER = "[DONE]"
API_KEY_HEADER = "authorization"
RATE_LIMIT_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
)
"""The headers an OpenAI answer tells its rate limits by (a duration like ``6m0s`` for the resets)."""

_COUNT = re.compile(r"[0-9]{1,18}")
_DURATION = re.compile(r"(?:[0-9]{1,12}(?:\.[0-9]{1,9})?(?:h|ms|m|s|us|µs|ns))+")
_DURATION_PART = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)(h|ms|m|s|us|µs|ns)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float | None:
    """Seconds of a duration as OpenAI writes its resets (``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``); None when
    it is not one."""
    value = text.strip()
    if not _DURATION.fullmatch(value):
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in _DURATION_PART.findall(value))


def _allowance(headers: Mapping[str, str], remaining: str, reset: str) -> Allowance | None:
    left = headers.get(remaining)
    if left is None or not _COUNT.fullmatch(left.strip()):
        return None
    told = headers.get(reset)
    return Allowance(int(left.strip()), None if told is None else parse_duration(told))


def rate_budget(headers: Mapping[str, str]) -> Budget:
    """What an answer's rate-limit headers say is left (the module's table); header names in any case."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return Budget(
        _allowance(lowered, "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
        _allowance(lowered, "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    )


FINISH: Mapping[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}
FINISH_NAMES: Mapping[FinishReason, str] = {reason: name for name, reason in FINISH.items() if name != "function_call"}
"""The wire's name of each finish (the module's table: the inverse of FINISH, function_call being the old name)."""

ERROR_TYPES: Mapping[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    529: ("overloaded_error", "overloaded_error"),
}
"""The ``error.type`` and ``error.code`` OpenAI answers a status with (5xx not listed: server_error)."""


REFUSAL_CODES = frozenset({"content_policy_violation", "content_filter"})
"""The ``error.code`` of a content-policy refusal: OpenAI's, Azure's."""
AZURE_POLICY_CODE = "ResponsibleAIPolicyViolation"
"""Azure's ``error.innererror.code`` of a prompt its content filter refused."""
_FLAGGED = re.compile(r"flagged|usage polic|safety system|content (?:management )?polic", re.I)
"""What an ``invalid_prompt`` error says when it is a refusal (and not a malformed prompt)."""


def filtered_categories(*results: Any) -> list[str]:
    """The categories Azure's ``content_filter_result(s)`` objects mark ``"filtered": true``, each once, in order;
    a ``prompt_filter_results`` list of ``{"content_filter_results": ...}`` is read through."""
    out: list[str] = []
    for result in results:
        if isinstance(result, list):
            nested = [r.get("content_filter_results") for r in result if isinstance(r, dict)]
            out += [c for c in filtered_categories(*nested) if c not in out]
            continue
        if not isinstance(result, dict):
            continue
        for name, verdict in result.items():
            if isinstance(verdict, dict) and verdict.get("filtered") is True and str(name) not in out:
                out.append(str(name))
    return out


def error_refusal(body: str) -> tuple[str, str] | None:
    """(category, the provider's words) when an error body is a content-policy refusal (the module's table);
    None when it is any other error."""
    try:
        parsed: Any = loads(body)
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    code = code if isinstance(code, str) else ""
    message = error.get("message")
    message = message if isinstance(message, str) else ""
    inner = error.get("innererror")
    inner = inner if isinstance(inner, dict) else {}
    flagged = code == "invalid_prompt" and _FLAGGED.search(message) is not None
    if code not in REFUSAL_CODES and inner.get("code") != AZURE_POLICY_CODE and not flagged:
        return None
    categories = filtered_categories(inner.get("content_filter_result"), inner.get("content_filter_results"))
    return ",".join(categories) or code or "content_filter", message


def api_key_of(headers: Mapping[str, str]) -> str:
    """The key of ``authorization: Bearer KEY`` (the header as sent when it is not a bearer)."""
    auth = headers.get(API_KEY_HEADER, "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else auth


def render_tool(
    name: str, description: str, parameters: dict[str, Any] | None, strict: bool | None = None
) -> dict[str, Any]:
    """A tool definition: ``{"type": "function", "function": {"name", "description", "parameters", "strict"?}}``
    (``strict`` only when the definition sets it: Chat Completions' default is false)."""
    schema = parameters if parameters is not None else EMPTY_PARAMETERS
    function: dict[str, Any] = {"name": name, "description": description, "parameters": schema}
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


MAX_STOP = 4
"""Stop sequences OpenAI takes at most."""
DEFAULT_FILENAME = "document.pdf"
"""A PDF's ``file.filename`` when its part has no title (the API asks for a filename with ``file_data``)."""

_BUDGET_LEVELS = ((1024, "minimal"), (4096, "low"), (16384, "medium"))
"""Below each budget, its level; at or above the last one: high (the module's table)."""


def effort_for_budget(budget_tokens: int) -> str:
    """The ``reasoning_effort`` a reasoning budget is sent as (the module's table)."""
    return next((level for below, level in _BUDGET_LEVELS if budget_tokens < below), "high")


_PLACEHOLDER = "[image {n}: in the user message after these tool results]"
_LABEL = "[image {n}, of tool result {call_id}]"
_PLACEHOLDER_RE = re.compile(re.escape(_PLACEHOLDER).replace(r"\{n\}", r"([1-9][0-9]*)"))
_LABEL_RE = re.compile(
    re.escape(_LABEL).replace(r"\{n\}", r"([1-9][0-9]*)").replace(r"\{call_id\}", r"(.*)"), re.DOTALL
)


def tool_image_placeholder(n: int) -> str:
    """The text part standing, in a tool message, where the turn's ``n``-th image (from 1) stood."""
    return _PLACEHOLDER.format(n=n)


def tool_image_label(n: int, call_id: str) -> str:
    """The text part before the turn's ``n``-th image in the user message that carries it."""
    return _LABEL.format(n=n, call_id=call_id)


def tool_image_slot(text: str) -> int | None:
    """The image number a placeholder text part stands for; None for any other text."""
    match = _PLACEHOLDER_RE.fullmatch(text)
    return int(match[1]) if match else None


def tool_image_labelled(text: str) -> tuple[int, str] | None:
    """The image number and the call id of a label text part; None for any other text."""
    match = _LABEL_RE.fullmatch(text)
    return (int(match[1]), match[2]) if match else None
