"""The OpenAI Responses upstream (``POST {base}/responses``), whole and streamed, always stateless.

Every request is ``store: false`` with ``include: ["reasoning.encrypted_content"]`` and never a
``previous_response_id``: the whole conversation goes each time, reasoning items included, so a
retry or a route's failover hop depends on nothing held at one provider. ``ResponsesUpstream.body``
renders a ChatRequest in the shapes ``front.py`` reads back (``shapes.Request``; ``items.py`` renders
the input items)::

    core (ChatRequest)                          Responses body
    system                                      instructions
    Message(USER, text | parts)                 a user message: its text, or input_text / input_image (a data:
                                                URL or the URL; detail or "auto") / input_file parts (a PDF as a
                                                data: URL named by its title or DEFAULT_FILENAME, or its URL)
    Message(ASSISTANT, reasoning, text | text   the reasoning items (``vocab``'s table), an assistant message
      parts, tool_calls)                        (when it has text: a string or output_text parts), then a
                                                function_call item per call
    Message(TOOL, tool_results)                 a function_call_output item per result: its content, or its
                                                parts as input_text / input_image; TOOL_ERROR_PREFIX before an
                                                error; then the message's own text, if any, as a user message
    tools (tools.strict)                        flat function tools (strict false unless the definition asks
                                                true: the API's own default is true)
    response schema                             text.format json_schema, named "response", strict false
    max_tokens, temperature, top_p,             max_output_tokens and the same names
      parallel_tool_calls, tool_choice
    reasoning                                   reasoning {"effort": the effort, or the level of
                                                ``vocab.effort_for_budget``, "summary": "auto"}
    end_user                                    safety_identifier
    provider_options_json {"openai_responses"}  its keys merged into the body (``service_tier``,
                                                ``prompt_cache_key``, ``truncation`` ...); ``store``,
                                                ``previous_response_id`` and ``conversation`` refused

Not carried, so refused by name before sending: stop, seed, presence / frequency penalties and top_k
(the Responses API has none of them), cache breakpoints (OpenAI caches by itself; usage reports the
cached tokens), a plain-text document, an assistant's image or document, a document in a tool result.

A reply, whole and streamed, is read by ``decoder.py``; a 200 whose ``error`` is set (a response that
``failed``) is an error answer (``providers.client``).

Error answers (and a stream's error events): a content-policy refusal first (``openai_chat.vocab.error_refusal``:
PROVIDER_REFUSAL, never retried, whatever the status); then an error that came in a 200 (a failed
response, a stream's error event, read as a 500) takes the status its ``code`` names (``_CODE_STATUS``);
then ``providers.errors.classify_response``, as for Chat Completions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import Controls, DocumentPart, ModelRequest, TextPart
from sidecar.core.json_depth import loads
from sidecar.core.kinds import Role
from sidecar.providers.formats.azure import RESPONSES
from sidecar.providers.formats.carried import FEATURES, format_rule, merge_carried, plain, refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest
from sidecar.providers.formats.fields import text_or_empty
from sidecar.providers.formats.openai_client import OpenAIClient
from sidecar.providers.formats.openai_responses.decoder import ResponsesStream, read_response
from sidecar.providers.formats.openai_responses.items import input_items
from sidecar.providers.formats.openai_responses.shapes import Request
from sidecar.providers.formats.openai_responses.vocab import FORMAT_NAME, INCLUDE, RESPONSES_PATH, effort_for_budget
from sidecar.providers.formats.options import merge_options, options_for
from sidecar.providers.formats.shapes import declared

__all__ = ["SIDECAR_KEYS", "ResponsesUpstream", "provider_options"]

SIDECAR_KEYS = declared(Request) - {"store"}
"""The body keys the sidecar sets itself, the front's (``store``: refused with its reason): refused in
``provider_options_json`` (set the request's own field)."""
_REFUSED_OPTIONS = {
    "store": "the sidecar runs the Responses API stateless (store: false): a retry or a failover hop must not "
    "depend on a response held at one provider",
    "previous_response_id": "the sidecar sends the whole conversation every time (store: false)",
    "conversation": "the sidecar sends the whole conversation every time (store: false)",
}
_CACHE = "OpenAI caches a prompt by itself, with no breakpoints (usage reports the cached tokens)"
_WHY: Mapping[str, str] = {
    "parts.cache": _CACHE,
    "tools.cache": _CACHE,
    "system_cache": _CACHE,
    "stop": "the Responses API has no stop sequences",
    "seed": "the Responses API has no seed",
    "presence_penalty": "the Responses API has no presence_penalty",
    "frequency_penalty": "the Responses API has no frequency_penalty",
    "top_k": "the Responses API has no top_k",
    "parts.text_document": "the Responses API takes a file as a PDF: send the text as a text part",
}
"""Why the format does not carry a feature, for the refusal's words."""
_CODE_STATUS: Mapping[str, int] = {
    "rate_limit_exceeded": 429,
    "context_length_exceeded": 400,
    "invalid_prompt": 400,
    "server_error": 500,
}
"""The status an error that came in a 200 (a failed response, a stream's error event) stands for, by its code."""


class ResponsesUpstream(OpenAIClient):
    """The sidecar as a Responses API client (the module's tables); with ``azure``, Azure OpenAI's URLs
    and credential (``formats.openai_client``)."""

    own_path = RESPONSES_PATH
    operation = RESPONSES

    carries: frozenset[str] = frozenset(FEATURES).difference(_WHY)
    """What the format carries (``formats.carried``): every feature but those ``_WHY`` says it does not."""

    def check(self, request: ModelRequest, model_id: str) -> None:
        if plain(request):
            return
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id, _WHY)
        for i, m in enumerate(request.messages):
            for j, thought in enumerate(m.reasoning):
                if j == 0 and not (thought.signature or thought.redacted_data):
                    rule = "a reasoning item goes back with its id and encrypted content (the signature)"
                    raise format_rule(f"messages[{i}].reasoning[{j}].signature", "", model_id, FORMAT_NAME, rule)
            if m.role is Role.ASSISTANT:
                for j, part in enumerate(m.parts):
                    if not isinstance(part, TextPart):
                        rule = "an assistant message carries text parts only"
                        raise format_rule(f"messages[{i}].parts[{j}]", type(part).__name__, model_id, FORMAT_NAME, rule)
            for j, r in enumerate(m.tool_results):
                for k, part in enumerate(r.parts):
                    if isinstance(part, DocumentPart):
                        rule = "a function_call_output carries text and images"
                        raise format_rule(
                            f"messages[{i}].tool_results[{j}].parts[{k}]", "document", model_id, FORMAT_NAME, rule
                        )
        c = request.controls
        if not request.tools:
            for name, value in (("tool_choice", c.tool_choice), ("parallel_tool_calls", c.parallel_tool_calls)):
                if value is not None:
                    raise format_rule(name, name, model_id, FORMAT_NAME, f"OpenAI takes {name} only with tools")
        if c.reasoning is not None and request.temperature not in (None, 1.0):
            rule = "OpenAI's reasoning models take only the default temperature (1): leave it unset with reasoning"
            raise format_rule("temperature", str(request.temperature), model_id, FORMAT_NAME, rule)
        provider_options(c)

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.upstream_model, "input": input_items(request.messages)}
        if request.system:
            body["instructions"] = request.system
        body["max_output_tokens"] = request.max_tokens
        body["store"] = False
        body["include"] = [INCLUDE]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                merge_carried(
                    {
                        "type": "function",
                        "name": t.name,
                        "description": t.description,
                        "parameters": json.loads(t.parameters_json) if t.parameters_json else _EMPTY,
                        "strict": t.strict is True,  # unset: false, not the API's default true
                    },
                    t.carried,
                    FORMAT_NAME,
                )
                for t in request.tools
            ]
        if request.response_schema is not None:
            schema = {"type": "json_schema", "name": "response", "schema": request.response_schema, "strict": False}
            body["text"] = {"format": schema}
        body.update(_controls(request.controls))
        if stream:
            body["stream"] = True
        merge_options(body, provider_options(request.controls), FORMAT_NAME, SIDECAR_KEYS)
        return merge_carried(body, request.carried, FORMAT_NAME)

    def stream_decoder(self) -> ResponsesStream:
        return ResponsesStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        return read_response(body)

    def status_of(self, status: int, body: str) -> int:
        """An error that came in a 200 or as a 500 (a failed response, a stream's error event): the status
        its code names (``_CODE_STATUS``)."""
        return _CODE_STATUS.get(_error_code(body), status) if status in (200, 500) else status


_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _error_code(body: str) -> str:
    try:
        parsed: Any = loads(body)
    except ValueError:
        return ""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return text_or_empty(error.get("code")) if isinstance(error, dict) else ""


def provider_options(controls: Controls) -> dict[str, Any]:
    """The keys ``provider_options_json`` merges into a Responses body (its ``"openai_responses"`` object)."""
    return options_for(controls.provider_options_json, FORMAT_NAME, SIDECAR_KEYS, _REFUSED_OPTIONS)


# ---------------------------------------------------------------------------- the body


def _controls(c: Controls) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.reasoning is not None:
        budget = c.reasoning.budget_tokens
        effort = c.reasoning.effort if budget is None else effort_for_budget(budget)
        out["reasoning"] = {"effort": effort, "summary": "auto"}
    if c.tool_choice is not None:
        mode = c.tool_choice.mode
        out["tool_choice"] = {"type": "function", "name": c.tool_choice.name} if mode == "tool" else mode
    if c.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = c.parallel_tool_calls
    if c.top_p is not None:
        out["top_p"] = c.top_p
    if c.end_user:
        out["safety_identifier"] = c.end_user
    return out
