"""The toy format's front: a request read into the core's, a reply and an error rendered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import Message, ModelRequest
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, StreamWriter

PATH = "/toy/complete"
STOPS = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length"}
ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT}


class ToyFront:
    path = PATH
    words = "a toy-compatible"
    id_prefix = "toy-"

    @property
    def params(self) -> ParamNames:
        return {"max_output_tokens": "max_tokens", "messages": "prompt"}

    def parse(self, body: dict[str, Any]) -> Ask:
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not prompt:
            raise InvalidInput("prompt", "", "must be a non-empty list of {role, text}")
        messages = []
        for i, turn in enumerate(prompt):
            if not isinstance(turn, dict) or turn.get("role") not in ROLES:
                raise InvalidInput(f"prompt[{i}].role", "", "must be 'user' or 'assistant'")
            messages.append(Message(ROLES[turn["role"]], str(turn.get("text", ""))))
        limit = body.get("max_tokens")
        return Ask(ModelRequest(str(body.get("model", "")), tuple(messages), max_output_tokens=limit))

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        usage = {"in": reply.input_tokens, "out": reply.output_tokens}
        stop = STOPS.get(reply.finish, "stop")
        return {"id": head.reply_id, "model": head.model, "text": reply.text, "stop": stop, "usage": usage}

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> StreamWriter:
        raise InvalidInput("stream", "true", "the toy format does not stream")

    def error_body(
        self,
        message: str,
        error_type: str,
        *,
        code: str | None = None,
        param: str | None = None,
        extension: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        return {"error": {"kind": error_type, "message": message}}

    def answer(self, code: str, status: int) -> tuple[int, str]:
        return status, code

    def error_type(self, status: int) -> str:
        return {429: "busy", 404: "no_such_model"}.get(status, "bad_request" if status < 500 else "broken")

    def api_key(self, headers: Mapping[str, str]) -> str:
        return headers.get("x-toy-key", "")
