"""Scripted steps: what a fake answers instead of its normal behaviour.

A step is a JSON object; see :func:`parse_step` for the fields.  Steps queue per
key (a model name for the provider, a path for the tool backend) in FIFO order;
a key ending in ``*`` matches by prefix, ``*`` alone matches everything.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._http import Fault

__all__ = ["BASE_STEP_KEYS", "ScriptBook", "Step", "parse_step", "parse_steps"]

BASE_STEP_KEYS = frozenset({"status", "headers", "body", "delay_ms", "fault", "repeat"})


@dataclass(frozen=True)
class Step:
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    has_body: bool = False
    body: Any = None
    delay_ms: float = 0.0
    fault: Fault | None = None
    preset: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # preset parameters


def _int(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"step field {key!r} must be an integer, got {value!r}")
    return value


def parse_step(obj: Any, *, extra_keys: Iterable[str] = (), presets: Iterable[str] = ()) -> tuple[Step, int]:
    """Validate one step; returns it with its repeat count."""
    if not isinstance(obj, dict):
        raise ValueError(f"a step must be a JSON object, got {obj!r}")
    allowed = BASE_STEP_KEYS | set(extra_keys)
    preset_names = set(presets)
    if preset_names:
        allowed |= {"preset"}
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ValueError(f"unknown step field(s) {unknown}; allowed: {sorted(allowed)}")
    repeat = _int(obj, "repeat", 1)
    if repeat < 1:
        raise ValueError("step field 'repeat' must be >= 1")
    status = _int(obj, "status", 0) or None
    headers = obj.get("headers") or {}
    if not isinstance(headers, dict):
        raise ValueError("step field 'headers' must be an object")
    delay = obj.get("delay_ms", 0)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        raise ValueError("step field 'delay_ms' must be a non-negative number")
    fault = Fault.parse(obj["fault"]) if obj.get("fault") is not None else None
    preset = obj.get("preset")
    if preset is not None and preset not in preset_names:
        raise ValueError(f"unknown preset {preset!r}; known: {sorted(preset_names)}")
    params = {k: v for k, v in obj.items() if k not in BASE_STEP_KEYS and k != "preset"}
    step = Step(
        status=status,
        headers={str(k).lower(): str(v) for k, v in headers.items()},
        has_body="body" in obj,
        body=obj.get("body"),
        delay_ms=float(delay),
        fault=fault,
        preset=preset,
        params=params,
    )
    return step, repeat


def parse_steps(objs: Any, **kwargs: Any) -> list[tuple[Step, int]]:
    if not isinstance(objs, list):
        raise ValueError("'steps' must be a list")
    return [parse_step(o, **kwargs) for o in objs]


class ScriptBook:
    """FIFO queues of steps per key.  Not thread-safe: the owner holds a lock."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[list[Any]]] = {}

    def set(self, key: str, steps: list[tuple[Step, int]], append: bool = False) -> int:
        queue = self._queues.get(key) if append else None
        if queue is None:
            queue = deque()
            self._queues[key] = queue
        queue.extend([step, count] for step, count in steps)
        if not queue:
            del self._queues[key]
        return self._count(queue)

    def pop(self, value: str) -> Step | None:
        for key in self._candidates(value):
            queue = self._queues[key]
            entry = queue[0]
            step: Step = entry[0]
            entry[1] -= 1
            if entry[1] <= 0:
                queue.popleft()
            if not queue:
                del self._queues[key]
            return step
        return None

    def pending(self) -> dict[str, int]:
        return {key: self._count(q) for key, q in self._queues.items()}

    def clear(self) -> None:
        self._queues.clear()

    def _candidates(self, value: str) -> list[str]:
        keys = [value] if value in self._queues else []
        prefixes = [k for k in self._queues if k.endswith("*") and value.startswith(k[:-1])]
        return keys + sorted(prefixes, key=len, reverse=True)

    @staticmethod
    def _count(queue: deque[list[Any]]) -> int:
        return sum(int(entry[1]) for entry in queue)
