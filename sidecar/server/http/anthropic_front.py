"""The Anthropic-compatible front: ``POST /v1/messages``, whole or streamed, on the same core.

request key                    what the front does with it
model                          a catalog model id or a route id (``GET /v1/models`` lists both)
system, messages, tools,       ``providers.anthropic.parse_request`` -> the core's ModelRequest
  max_tokens, temperature
output_config.format           structured output: its ``json_schema`` is the call's response schema
                               (``providers.anthropic.output_schema``)
stream                         ``ModelService.stream``: message_start, content blocks, message_delta,
                               message_stop
tool_choice                    absent or {"type": "auto"} (the model chooses): anything else is 400
anything else                  (top_k, stop_sequences, metadata, thinking ...) not carried, ignored

answer                         what it holds
a reply                        ``message`` (``providers.anthropic.render_message``), header
                               ``x-sidecar-attempts``, and ``sidecar`` (as the OpenAI front's)
a failure                      Anthropic's error shape (``overloaded_error``, ``rate_limit_error`` ...),
                               the status of ``failures.py``; ``error.sidecar`` the sidecar's failure
a stream's message_delta       ``sidecar`` (the same as a reply's)
a failure in a stream          ``event: error`` (the SDK raises APIStatusError with the error's type)
a restart (opted in)           ``event: sidecar_restart`` {type, cause, reason, attempt}; the new reply's
                               content blocks are numbered from 0 again
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sidecar.core.conversation import ModelResponse
from sidecar.core.stream import Restart, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers import anthropic
from sidecar.providers.wire import shown
from sidecar.server.http.failures import Answer
from sidecar.server.http.fronts import Ask, Sse, StreamWriter, new_id, positive_budget
from sidecar.server.http.openai_front import stream_flag

__all__ = ["MESSAGES_PATH", "RESTART_EVENT", "AnthropicFormat"]

MESSAGES_PATH = "/v1/messages"
RESTART_EVENT = "sidecar_restart"


class AnthropicFormat:
    name = "an Anthropic-compatible"

    def parse(self, body: dict[str, Any]) -> Ask:
        request = anthropic.parse_request(body)
        positive_budget(request, "max_tokens")
        schema = anthropic.output_schema(body)
        if schema is not None:
            request = replace(request, response_schema_json=schema)
        choice = body.get("tool_choice")
        if choice is not None and choice != {"type": "auto"}:
            rule = 'must be {"type": "auto"}: the sidecar lets the model choose'
            raise InvalidInput("tool_choice", shown(choice), rule)
        return Ask(request, stream_flag(body))

    def reply(self, response: ModelResponse, model: str, extension: dict[str, Any]) -> dict[str, Any]:
        return anthropic.render_message(response, message_id=new_id("msg_"), model=model, extension=extension)

    def error(self, failure: SidecarFailure, answer: Answer, extension: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return answer.anthropic, anthropic.render_error(failure.message, answer.anthropic_type, sidecar=extension)

    def writer(self, ask: Ask, model: str) -> StreamWriter:
        return _Writer(anthropic.EventWriter(message_id=new_id("msg_"), model=model))


class _Writer:
    def __init__(self, events: anthropic.EventWriter) -> None:
        self._events = events

    def start(self) -> list[Sse]:
        return list(self._events.start())

    def delta(self, delta: TextDelta | ToolCallDelta) -> list[Sse]:
        return list(self._events.delta(delta))

    def restart(self, restart: Restart) -> list[Sse]:
        self._events.restarted()
        data = {"type": RESTART_EVENT, "cause": restart.cause.name.lower(), "reason": restart.reason}
        return [(RESTART_EVENT, {**data, "attempt": restart.attempt})]

    def final(self, response: ModelResponse, extension: dict[str, Any]) -> list[Sse]:
        return list(self._events.finish(response, sidecar=extension))

    def error(self, failure: SidecarFailure, answer: Answer, extension: dict[str, Any]) -> list[Sse]:
        return [("error", anthropic.render_error(failure.message, answer.anthropic_type, sidecar=extension))]
