"""What the fake Anthropic checks, as the API does (a 400 ``invalid_request_error`` with the API's words)::

    the request's shape           the format's front reads it (an unknown block or source is refused; a key
                                  it does not read is carried); a request key the API does not have is
                                  refused (``API_KEYS``); beside what it carries it takes output_format,
                                  service_tier, inference_geo, speed and container (recorded, not acted on)
    thinking (enabled/adaptive)   budget_tokens >= 1024 and < max_tokens; temperature only 1; no top_k;
                                  top_p in [0.95, 1]; tool_choice auto or none; no assistant prefill;
                                  a tool turn (the last message has tool_result blocks) whose assistant
                                  turn has tool_use must begin with its thinking / redacted_thinking block
    every thinking block          its signature verifies (an HMAC of its text under the fake's own key:
                                  any byte of the text or the signature changed is refused); every
                                  redacted_thinking block's data verifies the same way
    cache_control                 at most 4 blocks (tools, system, messages, tool_result content);
                                  a ttl "1h" one never after a "5m" one
    images                        a base64 source: image/jpeg, png, gif or webp, valid base64, and the
                                  bytes are of that type
    PDFs                          a base64 source: application/pdf, valid base64, bytes that begin %PDF-

The request's shape is the format's front's (``_anthropic.ANTHROPIC.parse``); the rest is here, each
check given the request's body as it came.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import Any

from sidecar.core.details import InvalidInputDetail
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages.fake_signing import redacted_ok, sign_thinking
from sidecar.providers.formats.anthropic_messages.vocab import (
    MAX_CACHE_BREAKPOINTS,
    MIN_THINKING_BUDGET,
    PDF,
    THINKING_TOP_P,
)

__all__ = ["check_cache", "check_prefill", "check_signatures", "check_sources", "check_thinking"]

_IMAGE_TYPES = {
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
_DOCS = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _refused(message: str, parameter: str = "") -> InvalidInput:
    return InvalidInput.worded(message, detail=InvalidInputDetail(parameter=parameter, value="", rule=message))


API_KEYS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream", "temperature",
        "top_p", "top_k", "tools", "tool_choice", "thinking", "output_config", "output_format", "service_tier",
        "container", "mcp_servers", "context_management", "inference_geo", "speed", "cache_control",
    }
)  # fmt: skip
"""The Messages API's request keys: another is refused, as the API refuses it ("Extra inputs are not permitted"),
though the sidecar's front carries a key it does not read to an Anthropic deployment."""


def check_keys(body: dict[str, Any]) -> None:
    """The API's 400 for the first request key it does not have."""
    for key in body:
        if key not in API_KEYS:
            raise _refused(f"{key}: Extra inputs are not permitted", key)


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def check_thinking(body: dict[str, Any]) -> None:
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "adaptive"):
        return
    assert isinstance(thinking, dict)
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            raise _refused("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= (body.get("max_tokens") or 0):
            raise _refused(f"`max_tokens` must be greater than `thinking.budget_tokens`. {_DOCS}")
    if body.get("temperature") not in (None, 1, 1.0):
        raise _refused(f"`temperature` may only be set to 1 when thinking is enabled. {_DOCS}")
    if body.get("top_k") is not None:
        raise _refused(f"`top_k` must be unset when thinking is enabled. {_DOCS}")
    low, high = THINKING_TOP_P
    top_p = body.get("top_p")
    if top_p is not None and not low <= top_p <= high:
        raise _refused(f"`top_p` must be greater than or equal to {low} and at most {high} with thinking. {_DOCS}")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise _refused("Thinking may not be enabled when tool_choice forces tool use.")
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[-1].get("role") == "assistant":
        raise _refused("When thinking is enabled, the final message must be a user message (no prefill).")
    last = _blocks(messages[-1].get("content")) if messages else []
    if len(messages) < 2 or not any(b.get("type") == "tool_result" for b in last):
        return
    turn = len(messages) - 2
    content = _blocks(messages[turn].get("content"))
    if messages[turn].get("role") == "assistant" and any(b.get("type") == "tool_use" for b in content):
        first = content[0].get("type")
        if first not in ("thinking", "redacted_thinking"):
            raise _refused(
                f"messages.{turn}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
                "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
                "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. " + _DOCS,
                f"messages[{turn}].content[0]",
            )


def check_prefill(body: dict[str, Any]) -> None:
    """A last assistant message (a prefill) may not end with whitespace, as the API says."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages or messages[-1].get("role") != "assistant":
        return
    content = messages[-1].get("content")
    blocks = _blocks(content)
    last = content if isinstance(content, str) else (blocks[-1].get("text") if blocks else None)
    if isinstance(last, str) and last != last.rstrip():
        raise _refused("messages: final assistant content cannot end with trailing whitespace")


def check_signatures(body: dict[str, Any]) -> None:
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for j, b in enumerate(_blocks(m.get("content"))):
            at = f"messages.{i}.content.{j}"
            if b.get("type") == "thinking":
                signature, text = b.get("signature"), b.get("thinking")
                good = isinstance(text, str) and isinstance(signature, str)
                if not good or not hmac.compare_digest(str(signature), sign_thinking(str(text))):
                    raise _refused(f"{at}: Invalid `signature` in `thinking` block", f"messages[{i}].content[{j}]")
            elif b.get("type") == "redacted_thinking" and not redacted_ok(str(b.get("data"))):
                raise _refused(f"{at}: Invalid `data` in `redacted_thinking` block", f"messages[{i}].content[{j}]")


def _cached_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every block with cache_control, in the order the prompt is read: tools, system, messages."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    out = [t for t in tools if t.get("cache_control")]
    out += [b for b in _blocks(body.get("system")) if b.get("cache_control")]
    for m in body.get("messages") or []:
        for b in _blocks(m.get("content") if isinstance(m, dict) else None):
            out += [c for c in _blocks(b.get("content")) if c.get("cache_control")]
            if b.get("cache_control"):
                out.append(b)
    return out


def check_cache(body: dict[str, Any]) -> None:
    blocks = _cached_blocks(body)
    if len(blocks) > MAX_CACHE_BREAKPOINTS:
        raise _refused(f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                       f"Found {len(blocks)}.")  # fmt: skip
    ttls = [b["cache_control"].get("ttl") or "5m" for b in blocks if isinstance(b["cache_control"], dict)]
    if "1h" in ttls and "5m" in ttls and ttls.index("5m") < len(ttls) - 1 - ttls[::-1].index("1h"):
        raise _refused("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block")


def check_sources(body: dict[str, Any]) -> None:
    for i, m in enumerate(body.get("messages") or []):
        for j, b in enumerate(_blocks(m.get("content") if isinstance(m, dict) else None)):
            _check_source(b, f"messages.{i}.content.{j}")
            for k, inner in enumerate(_blocks(b.get("content"))):
                _check_source(inner, f"messages.{i}.content.{j}.content.{k}")


def _check_source(block: dict[str, Any], at: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return
    kind, media_type = block.get("type"), source.get("media_type")
    where = f"{at}.{'pdf' if kind == 'document' else kind}.source.base64"
    if kind == "image" and media_type not in _IMAGE_TYPES:
        raise _refused(f"{where}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
    try:
        data = base64.b64decode(str(source.get("data")), validate=True)
    except (binascii.Error, ValueError):
        raise _refused(f"{where}.data: The {kind} data is not valid base64.") from None
    if kind == "image" and not data.startswith(_IMAGE_TYPES[str(media_type)]):
        raise _refused(f"{where}.data: Image does not match the provided media type {media_type}")
    if kind == "document" and (media_type != PDF or not data.startswith(b"%PDF-")):
        raise _refused(f"{where}: The PDF specified was not valid.")
