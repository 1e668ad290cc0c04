"""The fake provider's wire of the toy format: the brain's replies through the toy front's renderers."""

from __future__ import annotations

from typing import Any

from sidecar.fakes._conversation import Hints
from sidecar.fakes._sse import Part, SseEvent
from sidecar.fakes._wire import ErrorSpec, Exchange, Wire
from toy_format import FORMAT


class _Toy(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "toy-fake"
    call_prefix = "toy_call_"

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        return Hints(), body

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        return "body"

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        specs = {"rate_limit": (429, "busy"), "server_error": (500, "broken"), "model_not_found": (404, "missing")}
        status, kind = specs.get(preset, (0, ""))
        return ErrorSpec(status, kind, f"toy {preset}") if status else None

    def status_error(self, status: int) -> ErrorSpec:
        return ErrorSpec(status, self.front.error_type(status), f"toy error (HTTP {status})")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        return {"x-toy-request": f"{ex.n}"}

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        return []


TOY = _Toy()
