"""A conversation that does not fit the model's window: the request's ``on_overflow``, and the
compacted history a reply carries.

    overflow_policy("compact")                    on_overflow: compact with the model's strategies
    overflow_policy(["tool_results", "summarize"])  on_overflow: compact, the strategies in that order
    overflow_policy("fail")                       on_overflow: CONTEXT_OVERFLOW at once
    compacted(messages, reply)                    the conversation to go on with: the reply's compacted
                                                  messages when the sidecar compacted, else ``messages``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

from sidecar_contract.v1 import sidecar_pb2 as pb

__all__ = ["OVERFLOW_ACTIONS", "STRATEGIES", "Overflow", "Strategy", "compacted", "overflow_policy"]

Overflow: TypeAlias = Literal["fail", "compact"]
Strategy: TypeAlias = Literal["tool_results", "reasoning", "summarize"]
OVERFLOW_ACTIONS: dict[str, pb.OverflowAction] = {
    "fail": pb.OVERFLOW_ACTION_FAIL,
    "compact": pb.OVERFLOW_ACTION_COMPACT,
}
STRATEGIES: dict[str, pb.CompactionStrategy] = {
    "tool_results": pb.COMPACTION_STRATEGY_TOOL_RESULTS,
    "reasoning": pb.COMPACTION_STRATEGY_REASONING,
    "summarize": pb.COMPACTION_STRATEGY_SUMMARIZE,
}


def overflow_policy(policy: Overflow | Sequence[Strategy] | pb.OverflowPolicy) -> pb.OverflowPolicy:
    """The request's ``on_overflow``: ``"fail"``, ``"compact"`` (the model's configured strategies), or
    the strategies to compact with, in the order they are tried (the action is then compact)."""
    if isinstance(policy, pb.OverflowPolicy):
        return policy
    if isinstance(policy, str):
        if policy not in OVERFLOW_ACTIONS:
            raise ValueError(
                f"on_overflow is one of {', '.join(OVERFLOW_ACTIONS)} or a list of strategies, not {policy!r}"
            )
        return pb.OverflowPolicy(action=OVERFLOW_ACTIONS[policy])
    unknown = [s for s in policy if s not in STRATEGIES]
    if unknown or not policy:
        raise ValueError(
            f"on_overflow's strategies are some of {', '.join(STRATEGIES)}, in order, not {list(policy)!r}"
        )
    return pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_COMPACT, strategies=[STRATEGIES[s] for s in policy])


def compacted(messages: Sequence[pb.Message], reply: pb.CallModelResponse) -> list[pb.Message]:
    """The conversation to go on with: the reply's compacted messages when the sidecar compacted it to fit
    (``reply.compaction``), else ``messages`` as they are. Append ``assistant(reply)`` to either."""
    if reply.HasField("compaction"):
        return list(reply.compaction.messages)
    return list(messages)
