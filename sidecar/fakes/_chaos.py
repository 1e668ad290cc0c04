"""Chaos mode: a seeded fraction of unscripted requests fail."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ._http import Fault
from ._script import Step

__all__ = ["Chaos", "ChaosConfig"]

_KINDS = ("rate_limit", "overload", "server_error", "reset")


@dataclass(frozen=True)
class ChaosConfig:
    rate_limit: float = 0.0
    overload: float = 0.0
    server_error: float = 0.0
    reset: float = 0.0
    retry_after: str | None = None  # sent as retry-after on rate_limit/overload answers
    seed: int | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ChaosConfig:
        unknown = sorted(set(raw) - set(_KINDS) - {"retry_after", "seed"})
        if unknown:
            raise ValueError(f"unknown chaos field(s) {unknown}")
        fractions: dict[str, float] = {}
        for kind in _KINDS:
            value = raw.get(kind, 0.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"chaos {kind!r} must be a fraction in [0, 1], got {value!r}")
            fractions[kind] = float(value)
        if sum(fractions.values()) > 1.0 + 1e-9:
            raise ValueError("chaos fractions add up to more than 1")
        seed = raw.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError("chaos 'seed' must be an integer")
        retry_after = raw.get("retry_after")
        return cls(
            retry_after=None if retry_after is None else str(retry_after),
            seed=seed,
            **fractions,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def active(self) -> bool:
        return any(getattr(self, kind) > 0 for kind in _KINDS)


class Chaos:
    """Draws one random number per unscripted request; deterministic for a seed."""

    def __init__(self, config: ChaosConfig | None = None) -> None:
        self.configure(config or ChaosConfig())

    def configure(self, config: ChaosConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)

    def pick(self) -> tuple[str, Step] | None:
        """The chaos kind and the step standing for it, or ``None`` (answer normally)."""
        cfg = self.config
        if not cfg.active:
            return None
        draw = self._rng.random()
        edge = 0.0
        for kind in _KINDS:
            edge += getattr(cfg, kind)
            if draw < edge:
                return kind, self._step(kind)
        return None

    def _step(self, kind: str) -> Step:
        if kind == "reset":
            return Step(fault=Fault.RESET)
        params = {} if self.config.retry_after is None else {"retry_after": self.config.retry_after}
        preset = "overloaded" if kind == "overload" else kind
        return Step(preset=preset, params=params)
