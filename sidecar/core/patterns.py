"""Patterns that are not ours run on RE2: matching takes time linear in the text, whatever the pattern.

    whose pattern                               where it runs
    a tool guardrail's deny_pattern             sidecar.tools.guardrails (compiled when the config loads)
    a JSON schema's pattern, patternProperties  sidecar.core.json_schemas (tool parameters, a caller's
    and format: regex                           tool definitions and response_schema_json)

Python's ``re`` backtracks: ``^(a+)+$`` against 30 ``a`` and a ``b`` takes seconds, doubling per
character, and holds the event loop all the while. RE2 has no backtracking, so it also lacks what
needs it: backreferences (``\\1``), lookahead and lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``),
possessive and atomic groups. A pattern that uses them is refused with that said (``PatternError``).
RE2 reads ``\\w``, ``\\d`` and ``\\s`` as ASCII classes, as JSON Schema's ECMA-262 dialect does.

Compiling is bounded too: RE2 refuses a pattern whose program would need more than
``PATTERN_MAX_MEM_BYTES`` (e.g. ``a{1000}`` nested), and counted repetitions above 1000.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import re2

__all__ = ["COMPILED_CACHE_SIZE", "PATTERN_MAX_MEM_BYTES", "Pattern", "PatternError", "compile_pattern", "search"]

PATTERN_MAX_MEM_BYTES = 8 * 1024 * 1024
"""RE2's memory budget for one compiled pattern (its own default); a larger program is refused."""
COMPILED_CACHE_SIZE = 256
"""Compiled patterns kept for reuse (a caller's schema sends the same patterns call after call)."""


class Pattern(Protocol):
    """A compiled pattern, as far as the sidecar uses one."""

    def search(self, text: str) -> object | None: ...


_MISSING_FEATURES = {
    "invalid escape sequence: \\": "backreferences such as \\1 are not supported",
    "invalid perl operator: (?=": "lookahead (?=...) is not supported",
    "invalid perl operator: (?!": "negative lookahead (?!...) is not supported",
    "invalid perl operator: (?<=": "lookbehind (?<=...) is not supported",
    "invalid perl operator: (?<!": "negative lookbehind (?<!...) is not supported",
    "invalid perl operator: (?>": "atomic groups (?>...) are not supported",
    "bad repetition operator: *+": "possessive quantifiers are not supported",
    "bad repetition operator: ++": "possessive quantifiers are not supported",
    "bad repetition operator: ?+": "possessive quantifiers are not supported",
    "invalid repetition size": "counted repetitions are limited to {,1000}",
    "pattern too large": "the pattern is too large to compile",
}


class PatternError(ValueError):
    """A pattern RE2 cannot run; the message says why, in words a config author or caller can act on."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the refusal is ours to report, not a line on stderr
    options.max_mem = PATTERN_MAX_MEM_BYTES
    return options


def _reason(exc: re2.error) -> str:
    raw = exc.args[0] if exc.args else b""
    said = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    for prefix, words in _MISSING_FEATURES.items():
        if said.startswith(prefix):
            return f"{said} ({words}: patterns run on RE2, which matches in linear time)"
    return said or "RE2 could not compile it"


@lru_cache(maxsize=COMPILED_CACHE_SIZE)
def compile_pattern(pattern: str) -> Pattern:
    """The compiled pattern, or PatternError saying what RE2 refused."""
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        raise PatternError(_reason(exc)) from None
    except (TypeError, ValueError) as exc:  # e.g. a lone surrogate cannot be encoded for RE2
        raise PatternError(str(exc)) from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (JSON Schema's ``pattern``: not anchored)."""
    compiled = compile_pattern(pattern)
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\\ud800"): matched as U+FFFD
        return compiled.search(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")) is not None
