"""The toy format's upstream: the sidecar as the toy's client."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sidecar.core.conversation import ModelRequest
from sidecar.core.kinds import FinishReason
from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.errors import Target, classify_response
from sidecar.providers.formats.carried import plain, refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault
from sidecar.providers.formats.protocol import SSE
from toy_format.front import PATH, ROLES, STOPS

FINISH = {name: finish for finish, name in STOPS.items()}
ROLE_NAMES = {role: name for name, role in ROLES.items()}


class ToyUpstream:
    carries: frozenset[str] = frozenset()
    stream_type = SSE

    def check(self, request: ModelRequest, model_id: str) -> None:
        if not plain(request):
            refuse_uncarried(request, self.carries, "toy", model_id)
        for i, m in enumerate(request.messages):  # text turns only: no tool calls or results
            if m.role not in ROLE_NAMES or m.tool_calls or m.tool_results:
                raise InvalidInput(f"messages[{i}]", "", f"model {model_id} speaks the toy format: text turns only")

    def path(self, model: str, *, stream: bool) -> str:
        return PATH

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"content-type": "application/json", **({"x-toy-key": api_key} if api_key else {})}

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        return dict(headers)

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        prompt = [{"role": ROLE_NAMES[m.role], "text": m.text} for m in request.messages]
        return {"model": request.upstream_model, "prompt": prompt, "max_tokens": request.max_tokens}

    def parse(self, body: dict[str, Any]) -> ChatReply:
        usage = body.get("usage") or {}
        return ChatReply(
            str(body.get("text", "")),
            finish=FINISH.get(str(body.get("stop")), FinishReason.UNSPECIFIED),
            raw_finish=str(body.get("stop", "")),
            input_tokens=int(usage.get("in", 0)),
            output_tokens=int(usage.get("out", 0)),
            response_model=str(body.get("model", "")),
            response_id=str(body.get("id", "")),
        )

    def stream_decoder(self) -> ToyStream:
        return ToyStream()

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        return classify_response(status, headers, body, target, secrets, now)

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        return Budget()


class ToyStream:
    """The toy does not stream: an event is data it never sends."""

    complete = False
    model = ""

    def feed(self, event: str, data: str) -> list[Delta]:
        raise StreamFault(f"the toy format does not stream (got {json.dumps(data)[:40]})")

    def reply(self) -> ChatReply | None:
        return None
