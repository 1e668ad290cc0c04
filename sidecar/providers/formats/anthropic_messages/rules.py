"""Anthropic's rules: what a request may not ask of the format, refused before anything is sent.

Not carried, so refused by name (``carried.refuse_uncarried``): seed, presence_penalty, frequency_penalty,
and another format's carried keys. ``check`` then refuses, as INVALID_INPUT naming the field and the rule,
what Anthropic's API refuses::

    rule                                                    field
    thinking: budget_tokens >= 1024 and < max_tokens         reasoning.budget_tokens
    thinking: effort low, medium or high                     reasoning.effort
    thinking: no temperature but 1, no top_k, top_p in       temperature, top_k, top_p
      [0.95, 1]
    thinking: tool_choice auto or none only                  tool_choice.mode
    thinking: no prefill (a last assistant message)          messages[i]
    at most 4 cache breakpoints (system, tools, parts);      the fifth's field; the 1h one's
      a 1h one before every 5m one
    an image's detail "low" (Anthropic has no low look)      messages[i].parts[j].detail
    an assistant message carries text parts only             messages[i].parts[j]
    a document given as data is a PDF                        messages[i].parts[j].media_type
    parallel_tool_calls with tool_choice none                parallel_tool_calls
    provider options: an object of format names, each an     provider_options_json[.name[.key]]
      object; none of the keys the sidecar sets

A budget the request does not bound (no max_output_tokens: the model's default budget is known only
when the body is rendered) is checked by ``upstream.AnthropicUpstream.body`` too, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator

from sidecar.core.conversation import DocumentPart, ImagePart, ModelRequest, Part, Reasoning, TextPart
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages.shapes import MessageCreateParams
from sidecar.providers.formats.anthropic_messages.vocab import (
    EFFORTS,
    FORMAT_NAME,
    MAX_CACHE_BREAKPOINTS,
    MIN_THINKING_BUDGET,
    PDF,
    THINKING_TOP_P,
)
from sidecar.providers.formats.carried import plain, refuse_uncarried
from sidecar.providers.formats.inline import read_data_url
from sidecar.providers.formats.options import options_for
from sidecar.providers.formats.shapes import declared

__all__ = ["SIDECAR_KEYS", "check", "check_budget", "check_effort"]

SIDECAR_KEYS = declared(MessageCreateParams)
"""The body's keys the sidecar sets from the request's own fields: provider options may not set them."""


def check(request: ModelRequest, model_id: str, carries: frozenset[str]) -> None:
    """Nothing, or INVALID_INPUT naming the first field the format does not carry or Anthropic refuses (the
    module's table)."""
    if plain(request):
        return
    refuse_uncarried(request, carries, FORMAT_NAME, model_id)
    controls = request.controls
    if controls.reasoning is not None:
        _check_thinking(request, controls.reasoning)
    choice = controls.tool_choice
    if controls.parallel_tool_calls is not None and choice is not None and choice.mode == "none":
        raise InvalidInput(
            "parallel_tool_calls",
            str(controls.parallel_tool_calls).lower(),
            "Anthropic's tool_choice none calls no tool: leave parallel_tool_calls unset",
        )
    for i, m in enumerate(request.messages):
        for j, part in enumerate(m.parts):
            _check_part(f"messages[{i}].parts[{j}]", part, m.role)
        for k, r in enumerate(m.tool_results):
            for j, part in enumerate(r.parts):
                _check_part(f"messages[{i}].tool_results[{k}].parts[{j}]", part, m.role)
    _check_breakpoints(request)
    options_for(controls.provider_options_json, FORMAT_NAME, SIDECAR_KEYS)


def check_budget(budget: int, max_tokens: int | None, bound: str) -> None:
    if budget < MIN_THINKING_BUDGET:
        rule = f"Anthropic's thinking.budget_tokens is at least {MIN_THINKING_BUDGET}"
        raise InvalidInput("reasoning.budget_tokens", str(budget), rule)
    if max_tokens is not None and budget >= max_tokens:
        rule = f"must be below {bound} ({max_tokens}): Anthropic counts the thinking within max_tokens"
        raise InvalidInput("reasoning.budget_tokens", str(budget), rule)


def check_effort(effort: str) -> None:
    if effort not in EFFORTS:
        rule = f"Anthropic's effort levels are {', '.join(EFFORTS)} (output_config.effort)"
        raise InvalidInput("reasoning.effort", effort, rule)


def _check_thinking(request: ModelRequest, reasoning: Reasoning) -> None:
    """Anthropic's rules for a request with thinking on (the module's table)."""
    controls = request.controls
    if reasoning.budget_tokens is not None:
        check_budget(reasoning.budget_tokens, request.max_output_tokens, "max_output_tokens")
    else:
        check_effort(reasoning.effort)
    if request.temperature is not None and request.temperature != 1.0:
        rule = "Anthropic takes no temperature but 1 with thinking on: leave it unset"
        raise InvalidInput("temperature", str(request.temperature), rule)
    if controls.top_k is not None:
        raise InvalidInput("top_k", str(controls.top_k), "Anthropic takes no top_k with thinking on")
    low, high = THINKING_TOP_P
    if controls.top_p is not None and not low <= controls.top_p <= high:
        raise InvalidInput("top_p", str(controls.top_p), f"with thinking on Anthropic takes a top_p in [{low}, {high}]")
    if controls.tool_choice is not None and controls.tool_choice.mode not in ("auto", "none"):
        rule = "with thinking on Anthropic's tool_choice is auto or none (it forces no tool)"
        raise InvalidInput("tool_choice.mode", controls.tool_choice.mode, rule)
    if request.messages and request.messages[-1].role is Role.ASSISTANT:
        at = f"messages[{len(request.messages) - 1}]"
        raise InvalidInput(at, "assistant", "with thinking on Anthropic continues no assistant message (prefill)")


def _check_part(at: str, part: Part, role: Role) -> None:
    if role is Role.ASSISTANT and not isinstance(part, TextPart):
        raise InvalidInput(at, type(part).__name__, "an assistant message carries text parts only (Anthropic)")
    if isinstance(part, ImagePart):
        if part.detail == "low":
            rule = "Anthropic has no low-detail look: it sees every image at full detail (leave detail unset)"
            raise InvalidInput(f"{at}.detail", part.detail, rule)
        if part.url.startswith("data:") and read_data_url(part.url) is None:
            raise InvalidInput(f"{at}.url", part.url[:80], "a data: URL is data:<media type>;base64,<data>")
    if isinstance(part, DocumentPart) and part.data and (part.media_type or PDF) != PDF:
        rule = "a document given as data is a PDF for Anthropic (plain text goes as the part's text)"
        raise InvalidInput(f"{at}.media_type", part.media_type, rule)


def _breakpoints(request: ModelRequest) -> Iterator[tuple[str, str]]:
    """``(field, ttl)`` of every cache breakpoint, in the order Anthropic reads the prompt: tools, system,
    messages."""
    for i, t in enumerate(request.tools):
        if t.cache is not None:
            yield f"tools[{i}].cache", t.cache.ttl
    if request.controls.system_cache is not None:
        yield "system_cache", request.controls.system_cache.ttl
    for i, m in enumerate(request.messages):
        for k, r in enumerate(m.tool_results):
            for j, part in enumerate(r.parts):
                if part.cache is not None:
                    yield f"messages[{i}].tool_results[{k}].parts[{j}].cache", part.cache.ttl
        for j, part in enumerate(m.parts):
            if part.cache is not None:
                yield f"messages[{i}].parts[{j}].cache", part.cache.ttl


def _check_breakpoints(request: ModelRequest) -> None:
    short = ""
    for n, (field, ttl) in enumerate(_breakpoints(request), start=1):
        if n > MAX_CACHE_BREAKPOINTS:
            rule = f"Anthropic takes at most {MAX_CACHE_BREAKPOINTS} cache breakpoints (system, tools and parts)"
            raise InvalidInput(field, f"breakpoint {n}", rule)
        if ttl == "1h" and short:
            rule = f"Anthropic wants a 1h breakpoint before every 5m one ({short} comes first)"
            raise InvalidInput(field, ttl, rule)
        if ttl != "1h":
            short = short or field
