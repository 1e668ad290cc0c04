"""Compaction run: a conversation that does not fit made smaller by the model's strategies, in order.

    when                                         trigger    the target (input estimate + output budget)
    the estimate does not fit the window         estimate   at most the window
    the provider says it is too long (once)      provider   at most PROVIDER_SHRINK of the estimate it refused
                                                            (its own count beat the estimate), and the window

Each strategy runs only while the conversation is still over its target; one that changed nothing is not a
step. ``summarize`` asks the model's summarizer (the prefix as a transcript that fits its own window, the middle
left out past it) through the same call path (``summarize``: the service's
observed call, its own span, attempts and spend), a child of the ``compaction`` span; its summary is kept by
the prefix it summarized (``core.compaction.cache``: in the process, and in a shared state backend that
offers it), so the same prefix compacted twice costs one call. A summarizer that fails leaves the strategy
out (a warning says why). Still over the window after every strategy: CONTEXT_OVERFLOW naming the sizes.

The policy: the call's own (``ModelRequest.on_overflow``), else the model's (``on_overflow``, ``compaction``).
A call's strategies are checked here, named by the caller's path (``on_overflow.strategies[1]``). A call's
``summarize`` on a deployment that names no summarizer is refused before sending as ``NotCarried``: called by
name, INVALID_INPUT naming the path; on a route, the next deployment is tried (it may have one), and the
refusal is the call's only when none does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from sidecar.config import ModelConfig
from sidecar.core.compaction.cache import SUMMARY_TTL_S, SharedSummaries, SummaryCache
from sidecar.core.compaction.reasoning import drop_old_reasoning
from sidecar.core.compaction.report import CompactionStart
from sidecar.core.compaction.summary import prefix_end, prefix_key, summary_request, summary_turns
from sidecar.core.compaction.tool_results import shorten_tool_results
from sidecar.core.conversation import (
    CallOptions,
    Compaction,
    CompactionStep,
    Message,
    ModelRequest,
    ModelResponse,
    Overflow,
)
from sidecar.core.observer import Observer
from sidecar.core.taxonomy import InvalidInput, NotCarried, SidecarFailure
from sidecar.core.text import clause
from sidecar.core.uncorrectable_failures import CompactedOverflow
from sidecar.providers.fitting import CHARS_PER_TOKEN, estimate_tokens

__all__ = ["PROVIDER_SHRINK", "TRANSCRIPT_SHARE", "Compactor", "Plan", "plan", "transcript_chars"]

PROVIDER_SHRINK = 0.75
"""After the provider said too long, the conversation is compacted to at most this share of the estimate
it refused (the estimate was short by an unknown amount: a quarter is a margin no format's count has beaten)."""
TRANSCRIPT_SHARE = 0.9
"""Of a summarizer's window less the summary's cap, the share the transcript of the prefix may take."""
_log = logging.getLogger("sidecar.models")

Summarize = Callable[[ModelRequest, CallOptions], Awaitable[ModelResponse]]


@dataclass(frozen=True, slots=True)
class Plan:
    """A call's resolved policy: compact or not, the strategies in order."""

    compact: bool
    strategies: tuple[str, ...]


def plan(request: ModelRequest, model: ModelConfig) -> Plan:
    """The call's policy: its own ``on_overflow`` over the model's; a bad value refused by its path."""
    asked = request.on_overflow
    action = (asked.action if asked is not None else None) or model.on_overflow
    if action not in Overflow.ACTIONS:
        raise InvalidInput("on_overflow.action", action, f"must be one of {', '.join(Overflow.ACTIONS)}")
    strategies = model.compaction.order
    if asked is not None and asked.strategies:
        seen: set[str] = set()
        for i, s in enumerate(asked.strategies):
            where = f"on_overflow.strategies[{i}]"
            if s not in Overflow.STRATEGIES:
                raise InvalidInput(where, s, f"must be one of {', '.join(Overflow.STRATEGIES)}")
            if s in seen:
                raise InvalidInput(where, s, "names a strategy already named")
            if s == Overflow.SUMMARIZE and model.compaction.summarizer is None:
                rule = f"needs a summarizer: model {request.model} names none (compaction.summarizer)"
                raise NotCarried(where, s, rule)  # a route's next deployment may have one
            seen.add(s)
        strategies = tuple(asked.strategies)
    return Plan(action == Overflow.COMPACT, strategies)


def transcript_chars(window: int, cap: int) -> int:
    """The characters of transcript a summarizer's window holds beside its summary (TRANSCRIPT_SHARE of the rest,
    at the estimate's characters per token: room for the instructions and the estimate's per-message tokens)."""
    return max(int((window - cap) * TRANSCRIPT_SHARE) * CHARS_PER_TOKEN, 0)


class Compactor:
    """Runs a plan's strategies on a request; keeps the summaries it made (``summarize`` makes them)."""

    def __init__(
        self,
        summarize: Summarize,
        observer: Observer,
        shared: SharedSummaries | None,
        models: Callable[[str], ModelConfig | None],
    ) -> None:
        self._summarize = summarize
        self._models = models
        self._observer = observer
        self._shared = shared
        self.cache = SummaryCache()

    async def compact(
        self,
        request: ModelRequest,
        model: ModelConfig,
        strategies: tuple[str, ...],
        *,
        trigger: str,
        budget: int,
        options: CallOptions,
        warnings: list[str],
    ) -> tuple[ModelRequest, Compaction]:
        """The request compacted to fit, and what changed (no steps: nothing could be compacted); CONTEXT_OVERFLOW
        when even that does not fit."""
        window = model.context_window
        before = estimate_tokens(request)
        target = window
        if trigger == Overflow.PROVIDER:
            target = min(window, math.floor((before + budget) * PROVIDER_SHRINK))
        start = CompactionStart(request.model, trigger, before, window, strategies)
        with self._observer.compaction(start) as record:
            current = request
            origin: list[int] = list(range(len(request.messages)))  # each message's index in the request
            steps: list[CompactionStep] = []
            calls = 0
            for strategy in strategies:
                now = estimate_tokens(current)
                if now + budget <= target:
                    break
                messages: tuple[Message, ...]
                if strategy == Overflow.TOOL_RESULTS:
                    messages, changed = shorten_tool_results(current.messages, model.compaction.keep_tool_results)
                    turns = [origin[i] for i in changed]
                elif strategy == Overflow.REASONING:
                    messages, changed = drop_old_reasoning(current.messages)
                    turns = [origin[i] for i in changed]
                else:
                    end = prefix_end(current.messages)
                    if end == 0:
                        continue
                    summary, made = await self._summary(current, model, end, options, warnings)
                    calls += made
                    if summary is None:
                        continue
                    messages = (*summary_turns(summary), *current.messages[end:])
                    turns = [i for i in origin[:end] if i >= 0]
                    origin = [-1, -1, *origin[end:]]
                if not turns and messages == current.messages:
                    continue
                current = replace(current, messages=messages)
                after = estimate_tokens(current)
                if after >= now:
                    continue  # noted, but it saved nothing (a summary longer than what it replaced)
                steps.append(CompactionStep(strategy, tuple(sorted(set(turns))), now, after))
            after = estimate_tokens(current)
            compaction = Compaction(trigger, before, after, tuple(steps), current.messages, calls)
            record.ended(compaction)
            if after + budget > window:
                done = ", ".join(s.strategy for s in steps) or f"nothing to compact by {', '.join(strategies)}"
                failure = CompactedOverflow(request.model, before, after, budget, window, done)
                record.failed(failure.kind_name)
                raise failure
        return current, compaction

    async def _summary(
        self, request: ModelRequest, model: ModelConfig, end: int, options: CallOptions, warnings: list[str]
    ) -> tuple[str | None, int]:
        """The summary of the request's first ``end`` messages, and the summarizing calls it cost (0: reused)."""
        summarizer = model.compaction.summarizer
        assert summarizer is not None  # plan() and the config refuse summarize without one
        cap = model.compaction.summary_max_tokens
        prefix = request.messages[:end]
        key = prefix_key(prefix, summarizer, cap)
        text = self.cache.get(key)
        if text is None and self._shared is not None:
            text = await self._shared.get_summary(key)
            if text is not None:
                self.cache.put(key, text)
        if text is not None:
            return text, 0
        writer = self._models(summarizer)
        room = None if writer is None else transcript_chars(writer.context_window, cap)
        asked = summary_request(prefix, summarizer, cap, request.job, max_chars=room)
        try:
            reply = await self._summarize(asked, replace(options, upstream_retries=None, probe=False))
        except SidecarFailure as failure:
            warning = f"compaction: summarize left out: the summarizer {summarizer} failed ({clause(failure.message)})"
            warnings.append(warning)
            _log.warning("%s: %s", request.model, warning, extra={"failure_kind": failure.kind_name})
            return None, 1
        text = reply.message.text.strip()
        if not text:
            warnings.append(f"compaction: summarize left out: the summarizer {summarizer} wrote nothing")
            return None, 1
        self.cache.put(key, text)
        if self._shared is not None:
            await self._shared.put_summary(key, text, SUMMARY_TTL_S)
        return text, 1
