"""The OpenAI-compatible front: ``POST /v1/chat/completions``, whole or streamed, on the same core.

request key                    what the front does with it
model                          a catalog model id or a route id (``GET /v1/models`` lists both)
messages, tools,               ``providers.openai.parse_request`` -> the core's ModelRequest
  response_format,
  max_tokens /
  max_completion_tokens,
  temperature
stream, stream_options         ``ModelService.stream``: ``chat.completion.chunk`` events, ``data: [DONE]`` last;
  .include_usage                 the usage chunk (empty choices) before it
n                              1 only (one choice): anything else is 400
tool_choice                    absent or "auto" (the model chooses): anything else is 400
anything else                  (top_p, seed, stop, user, parallel_tool_calls ...) not carried, ignored

answer                         what it holds
a reply                        ``chat.completion`` (``providers.openai.render_response``), header
                               ``x-sidecar-attempts``, and ``sidecar``: attempts, corrections, served_by,
                               provider, response_model, total_usage, cost_usd, warnings, hops
a failure                      OpenAI's error shape, the status of ``failures.py``; ``error.param`` the
                               parameter an INVALID_INPUT names; ``error.sidecar`` the sidecar's failure
a stream's last chunk          ``sidecar`` (the same as a reply's): the usage chunk, else the finish chunk
a failure in a stream          ``data: {"error": {...}}`` (the SDK raises APIError), no ``[DONE]``
a restart (opted in)           a chunk with empty ``choices`` and ``sidecar.restart``: cause, reason, attempt
"""

from __future__ import annotations

from typing import Any

from sidecar.core.clock import Clock
from sidecar.core.conversation import ModelResponse
from sidecar.core.details import InvalidInputDetail
from sidecar.core.stream import Restart, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers import openai
from sidecar.providers.wire import shown
from sidecar.server.http.failures import Answer
from sidecar.server.http.fronts import Ask, Sse, StreamWriter, new_id, positive_budget

__all__ = ["CHAT_PATH", "OpenAIFormat"]

CHAT_PATH = "/v1/chat/completions"


def stream_flag(body: dict[str, Any]) -> bool:
    value = body.get("stream", False)
    if not isinstance(value, bool) and value is not None:
        raise InvalidInput("stream", shown(value), "must be true or false")
    return bool(value)


class OpenAIFormat:
    name = "an OpenAI-compatible"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def _created(self) -> int:
        return int(self._clock.wall().timestamp())

    def parse(self, body: dict[str, Any]) -> Ask:
        request = openai.parse_request(body)
        positive_budget(request, "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens")
        stream = stream_flag(body)
        choices = body.get("n")
        if choices not in (None, 1):
            raise InvalidInput("n", shown(choices), "must be 1 (the sidecar answers with one choice)")
        choice = body.get("tool_choice")
        if choice not in (None, "auto"):
            raise InvalidInput("tool_choice", shown(choice), 'must be "auto": the sidecar lets the model choose')
        options = body.get("stream_options")
        include_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
        return Ask(request, stream, include_usage)

    def reply(self, response: ModelResponse, model: str, extension: dict[str, Any]) -> dict[str, Any]:
        return openai.render_response(
            response, response_id=new_id("chatcmpl-"), created=self._created(), model=model, extension=extension
        )

    def error(self, failure: SidecarFailure, answer: Answer, extension: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return answer.status, _error(failure, answer, extension)

    def writer(self, ask: Ask, model: str) -> StreamWriter:
        chunks = openai.ChunkWriter(response_id=new_id("chatcmpl-"), created=self._created(), model=model)
        return _Writer(chunks, ask.include_usage)


def _error(failure: SidecarFailure, answer: Answer, extension: dict[str, Any]) -> dict[str, Any]:
    param = failure.detail.parameter if isinstance(failure.detail, InvalidInputDetail) else None
    return openai.render_error(failure.message, answer.openai_type, answer.openai_code, param, sidecar=extension)


class _Writer:
    def __init__(self, chunks: openai.ChunkWriter, include_usage: bool) -> None:
        self._chunks = chunks
        self._usage = include_usage

    def start(self) -> list[Sse]:
        return [("", self._chunks.role())]

    def delta(self, delta: TextDelta | ToolCallDelta) -> list[Sse]:
        return [("", self._chunks.delta(delta))]

    def restart(self, restart: Restart) -> list[Sse]:
        self._chunks.restarted()
        words = {"cause": restart.cause.name.lower(), "reason": restart.reason, "attempt": restart.attempt}
        return [("", self._chunks.extension(sidecar={"restart": words}))]

    def final(self, response: ModelResponse, extension: dict[str, Any]) -> list[Sse]:
        if not self._usage:
            return [("", self._chunks.finish(response, sidecar=extension)), ("", openai.END_MARKER)]
        finish = self._chunks.finish(response)
        return [("", finish), ("", self._chunks.usage(response, sidecar=extension)), ("", openai.END_MARKER)]

    def error(self, failure: SidecarFailure, answer: Answer, extension: dict[str, Any]) -> list[Sse]:
        return [("", _error(failure, answer, extension))]
