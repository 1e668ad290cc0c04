"""Guardrails: configured rules a tool's arguments must pass before any call (GUARDRAIL, correctable).

guardrails:
  - name: pii
    parameter: query                       # optional: every string argument when absent
    deny_pattern: "[\\w.+-]+@[\\w-]+\\.\\w+"
    reason: must not contain an email address; remove personal data and call again

A deny_pattern runs on RE2 (``sidecar.core.patterns``): linear in the argument's length, so a
1 MiB argument is matched in milliseconds whatever the pattern (Python's ``re`` took minutes on
the pattern above). Each string is matched after a ``cpu_budget.checkpoint()``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.config import GuardrailConfig
from sidecar.core.cpu_budget import checkpoint
from sidecar.core.patterns import Pattern, compile_pattern
from sidecar.core.taxonomy import Guardrail

__all__ = ["Guardrails"]


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    parameter: str | None
    pattern: Pattern
    reason: str


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


class Guardrails:
    """The compiled rules of one tool."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Sequence[GuardrailConfig]) -> None:
        self._rules = [_Rule(r.name, r.parameter, compile_pattern(r.deny_pattern), r.reason) for r in rules]

    def check(self, arguments: dict[str, Any]) -> None:
        """Raise Guardrail for the first rule an argument breaks."""
        for rule in self._rules:
            scope = {rule.parameter: arguments.get(rule.parameter)} if rule.parameter else arguments
            for path, text in _strings(scope, ""):
                checkpoint()
                if rule.pattern.search(text):
                    raise Guardrail(rule.name, f"'{path}' {rule.reason}", text)
