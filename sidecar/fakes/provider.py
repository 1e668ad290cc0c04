"""FakeProvider: an LLM endpoint speaking every registered wire format, each through its ``fakes`` (``Wire``s).

Run it: ``python -m sidecar.fakes.provider --port 8787`` (prints its URL).
See :mod:`sidecar.fakes` for the scripting and control API.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import import_module
from typing import Any

from sidecar.core.clock import Clock, RealClock
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.formats.registry import FORMATS

from ._base import FakeServer
from ._chaos import Chaos, ChaosConfig
from ._cli import serve_forever
from ._conversation import Conversation
from ._http import Request, Response
from ._limits import RequestLimit
from ._presets import PRESET_PARAMS, PRESETS, render_default, render_step, validate_step
from ._script import Step
from ._wire import ErrorSpec, Exchange, Wire

__all__ = ["FakeProvider", "Wires", "main", "wires"]

PLAIN = "openai"
"""The format whose error shape answers a request to no route of any format (a 404)."""
PREFILL_REFUSED = (
    "This model does not support assistant message prefill. The conversation must end with a user message."
)
"""A step's ``refuse_prefill``: the 400 a provider that continues no last assistant message answers."""


@dataclass(frozen=True, slots=True)
class Wires:
    """The fake's wires, built from the registry: each registered format's ``fakes``, loaded on first use."""

    by_name: dict[str, Wire]
    """Each format's wire (the first of its ``fakes``), by the format's name."""
    routes: dict[str, Wire]
    """Each format's route (``Front.path``), and the same without ``/v1`` (a base URL that ends in it)."""
    routed: tuple[Wire, ...]
    """Every wire for ``Wire.routed``: the formats' own, then those behind other URLs (Azure OpenAI's)."""


def _load(where: str) -> Wire:
    module, _, name = where.partition(":")
    wire: Wire = getattr(import_module(module), name)
    return wire


@cache
def wires() -> Wires:
    """The fake's wires of every registered format (``WireFormat.fakes``), loaded once, at a fake provider's first
    request, never by the sidecar (``tests/unit/test_formats.py``: one for each format)."""
    loaded = {name: tuple(_load(w) for w in fmt.fakes) for name, fmt in FORMATS.items()}
    by_name = {name: fakes[0] for name, fakes in loaded.items()}
    routes = {path: w for w in by_name.values() for path in (w.front.path, w.front.path.removeprefix("/v1"))}
    more = (w for fakes in loaded.values() for w in fakes[1:])
    return Wires(by_name, routes, (*by_name.values(), *more))


def _route(request: Request) -> tuple[Wire | None, Any]:
    """The wire a request's path is a route of, and its body (with what the path says: ``Wire.routed``)."""
    body = request.json_or_none()
    wire = wires().routes.get(request.path.rstrip("/"))
    if wire is not None:
        return wire, body
    for candidate in wires().routed:
        routed = candidate.routed(request.path, body)
        if routed is not None:
            return candidate, routed if isinstance(body, dict) else body
    return None, body


class FakeProvider(FakeServer):
    """A scriptable fake LLM provider.  Scripts queue per request ``model`` (``*`` = any)."""

    script_key = "model"
    step_keys = PRESET_PARAMS
    presets = PRESETS

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        chaos: ChaosConfig | Mapping[str, Any] | None = None,
        max_records: int = 10000,
    ) -> None:
        super().__init__(host, port, max_records=max_records)
        self._chaos = Chaos(self._chaos_config(chaos))
        self._prompt_cache: set[str] = set()
        """What a wire's prompt caching has seen (Anthropic ``cache_control`` prefixes), until a reset."""
        self._limit: RequestLimit | None = None
        # every registered format's wire is loaded at the first request (``wires``), not here: the embedded default
        # starts this fake beside a sidecar that calls two of the five formats, and loading the five fake wires
        # was 20-60 ms of its start; a format registered after that first request is not served

    # ---- Python control API (thread-safe) ------------------------------------------------------

    def set_chaos(self, chaos: ChaosConfig | Mapping[str, Any] | None = None, **fields: Any) -> ChaosConfig:
        """Replace the chaos settings (and reseed); ``set_chaos()`` turns chaos off."""
        config = self._chaos_config(dict(chaos or {}, **fields) if not isinstance(chaos, ChaosConfig) else chaos)
        with self._lock:
            self._chaos.configure(config)
        return config

    @property
    def chaos(self) -> ChaosConfig:
        return self._chaos.config

    def limit_requests(self, limit: int | None, clock: Clock | None = None, window_s: float = 60.0) -> None:
        """Enforce ``limit`` requests a ``window_s`` window on ``clock`` (``_limits``; None: no limit), telling
        the budget in every answer's rate-limit headers."""
        with self._lock:
            self._limit = None if limit is None else RequestLimit(limit, clock or RealClock(), window_s)

    @property
    def rate_limited(self) -> int:
        """Requests the request limit answered 429."""
        with self._lock:
            return 0 if self._limit is None else self._limit.refused

    # ---- hooks ------------------------------------------------------------------------------

    @staticmethod
    def _chaos_config(chaos: ChaosConfig | Mapping[str, Any] | None) -> ChaosConfig:
        if isinstance(chaos, ChaosConfig):
            return chaos
        return ChaosConfig.from_mapping(chaos or {})

    def _validate_step(self, step: Step) -> None:
        validate_step(step)

    def _reset_locked(self) -> None:
        self._chaos.configure(ChaosConfig())
        self._prompt_cache.clear()
        self._limit = None

    def _health_locked(self) -> dict[str, Any]:
        return {"chaos": self._chaos.config.to_json()}

    def _control_extra(self, request: Request, name: str) -> Response | None:
        if name == "limit":
            return self._control_limit(request)
        if name != "chaos":
            return None
        if request.method == "POST":
            body = request.json()
            if not isinstance(body, dict):
                raise ValueError("chaos body must be a JSON object")
            return Response.json({"ok": True, "chaos": self.set_chaos(body).to_json()})
        return Response.json({"chaos": self.chaos.to_json()})

    def _control_limit(self, request: Request) -> Response:
        """``POST /_fake/limit {"requests": N | null, "window_s": 60}`` (real time); ``GET`` shows it."""
        if request.method == "POST":
            body = request.json()
            if not isinstance(body, dict):
                raise ValueError("limit body must be a JSON object")
            limit, window = body.get("requests"), body.get("window_s", 60.0)
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
                raise ValueError("'requests' must be an integer or null")
            if isinstance(window, bool) or not isinstance(window, int | float):
                raise ValueError("'window_s' must be a number")
            self.limit_requests(limit, window_s=float(window))
        with self._lock:
            held = self._limit
            shown = {"requests": held.limit, "window_s": held.window_s} if held else {"requests": None}
        return Response.json({**shown, "rate_limited": self.rate_limited})

    # ---- serving ------------------------------------------------------------------------------

    async def handle_app(self, request: Request) -> Response:
        wire, body = _route(request)
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        if wire is None or request.method != "POST":
            record = self._record(request, wire=wire.name if wire else None, model=model, source="unknown_route")
            ex = Exchange(record.seq, model, "", Conversation(model=model))
            spec = ErrorSpec(404, "invalid_request_error", f"Unknown request URL: {request.method} {request.path}.")
            plain = wires().by_name[PLAIN]
            return Response.json(plain.error_body(spec, ex), status=404, headers=plain.headers(ex, 404))
        if not isinstance(body, dict):
            record = self._record(request, wire=wire.name, model="", source="invalid_body")
            ex = Exchange(record.seq, "", wire.api_key(request.headers), Conversation())
            spec = wire.status_error(400)
            spec = ErrorSpec(400, spec.type, "The request body is not a valid JSON object.")
            return Response.json(wire.error_body(spec, ex), status=400, headers=wire.headers(ex, 400))
        gated = wire.gate(request)
        if gated is not None:  # refused before the body is read (Azure: no key, no api-version)
            record = self._record(request, wire=wire.name, model=model, source="gate")
            ex = Exchange(record.seq, model, "", Conversation(model=model))
            return Response.json(
                wire.error_body(gated, ex), status=gated.status, headers=wire.headers(ex, gated.status)
            )
        with self._lock:
            taken = None if self._limit is None else self._limit.take()
            now = None if self._limit is None else self._limit.clock.wall()
        if taken is None or now is None:
            return await self._reply(request, wire, body, model)
        if not taken.allowed:
            record = self._record(request, wire=wire.name, model=model, source="rate_limited")
            ex = Exchange(record.seq, model, wire.api_key(request.headers), Conversation(model=model))
            spec = wire.preset_error("rate_limit", ex) or wire.status_error(429)
            headers = {**wire.headers(ex, 429), "retry-after": str(-int(-taken.reset_s // 1))}
            return Response.json(
                wire.error_body(spec, ex), status=429, headers=headers | wire.budget_headers(taken, now)
            )
        response = await self._reply(request, wire, body, model)
        response.headers.update(wire.budget_headers(taken, now))
        return response

    async def _reply(self, request: Request, wire: Wire, body: dict[str, Any], model: str) -> Response:
        with self._lock:
            step = self._scripts.pop(model)
            source, preset = ("script", step.preset) if step is not None else ("default", None)
            if step is None:
                picked = self._chaos.pick()
                if picked is not None:
                    source, (preset, step) = "chaos", picked
        extra: dict[str, Any] = {}
        if body.get("stream") is True:  # only streamed requests carry these (older records keep their shape)
            extra = {"stream": True, "stream_fault": step.params.get("stream_fault") if step else None}
        record = self._record(request, wire=wire.name, model=model, source=source, preset=preset, **extra)
        key = wire.api_key(request.headers)
        denied = wire.unauthorized(request)
        if denied is not None:  # credentials that do not hold (a signature that does not verify)
            return _refusal(wire, denied, Exchange(record.seq, model, key, Conversation(model=model)))
        refused = wire.refuse(body)
        if refused is not None:  # a rule of the provider's API broken: its own 400
            return _refusal(wire, refused, Exchange(record.seq, model, key, Conversation(model=model)))
        try:
            conversation = wire.parse(body)
        except SidecarFailure as failure:  # a request the format cannot carry: refused as a provider would
            ex = Exchange(record.seq, model, key, Conversation(model=model))
            return _refusal(wire, ErrorSpec(400, wire.status_error(400).type, failure.message), ex)
        if step is not None and step.params.get("refuse_prefill") and conversation.prefill is not None:
            ex = Exchange(record.seq, model, key, conversation)
            spec = ErrorSpec(400, wire.status_error(400).type, PREFILL_REFUSED)
            return Response.json(wire.error_body(spec, ex), status=400, headers=wire.headers(ex, 400))
        usage = (step.params.get("usage") if step else None) or {}
        categories = tuple((step.params.get("categories") if step else None) or ())
        ex = Exchange(record.seq, model, key, conversation, usage, self._prompt_cache, categories)
        if step is None:
            return render_default(wire, ex)
        if step.params.get("echo_headers"):  # the reply's text: the request's headers, as they came
            echoed = "\n".join(f"{name}: {value}" for name, value in request.headers.items())
            step = replace(step, preset="reply", params={**step.params, "text": echoed})
        return render_step(step, wire, ex)


def _refusal(wire: Wire, spec: ErrorSpec, ex: Exchange) -> Response:
    """The error a provider answers before it reads the request any further, in the wire's shape."""
    headers = {**wire.headers(ex, spec.status), **wire.error_headers(spec)}
    return Response.json(wire.error_body(spec, ex), status=spec.status, headers=headers)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sidecar fake-provider", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8787, help="0 picks a free port")
    p.add_argument("--chaos-rate-limit", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--chaos-overload", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--chaos-server-error", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--chaos-reset", type=float, default=0.0, metavar="FRACTION")
    p.add_argument("--retry-after", default=None, help="retry-after header on chaos 429/529 answers")
    p.add_argument("--seed", type=int, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        chaos = ChaosConfig.from_mapping(
            {
                "rate_limit": args.chaos_rate_limit,
                "overload": args.chaos_overload,
                "server_error": args.chaos_server_error,
                "reset": args.chaos_reset,
                "retry_after": args.retry_after,
                "seed": args.seed,
            }
        )
    except ValueError as exc:
        _parser().error(str(exc))
    return serve_forever(FakeProvider(args.host, args.port, chaos=chaos))


if __name__ == "__main__":
    raise SystemExit(main())
