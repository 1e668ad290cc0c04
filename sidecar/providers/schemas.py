"""CallModel's request, checked before anything is sent, and the reply checked against what it asked.

``check_request``, each problem an INVALID_INPUT naming its field::

    model                  must name a catalog model or route (the catalog is listed)
    messages               at least one; each with a role and text, tool calls or tool results
    tools[i].name          set
    max_output_tokens      1 .. the model's maximum output
    job.upstream_retries   at most MAX_UPSTREAM_RETRIES
    temperature            0 .. 2

``CallChecks``, the JSON in it:

    tools[i].parameters_json                  at most policy.max_argument_bytes, nested at most 64
    response_schema_json                      deep, a Draft 2020-12 schema whose patterns RE2 can run,
                                              every $ref and $dynamicRef resolving
                                              (sidecar.core.json_schemas)
    messages[i].tool_calls[j].arguments_json  at most policy.max_argument_bytes; brackets nested at
                                              most 64 deep, read from the text before json.loads,
                                              JSON or not (an adapter parses it again)
    the reply                                 parse_reply, validate_reply (sidecar.providers.replies)

Every failure is INVALID_INPUT naming the field (the reply's own are JSON_PARSE / RESPONSE_VALIDATION,
for the model to correct). The work runs under ``policy.check_time_limit_s`` (``cpu_budget``), in a
worker thread unless it is small: a schema is remembered by its text once checked, so an agent that
sends the same schema on every call pays for checking it once.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from sidecar.config import Config
from sidecar.core.conversation import CallOptions, ModelRequest
from sidecar.core.cpu_budget import TooCostly, checks, off_loop
from sidecar.core.json_input import MAX_JSON_DEPTH, json_bytes, load_json, nested_over
from sidecar.core.json_schemas import SchemaProblem, check_schema, validator_for
from sidecar.core.kinds import Role
from sidecar.core.retry import MAX_UPSTREAM_RETRIES
from sidecar.core.taxonomy import InvalidInput, ResponseValidation
from sidecar.providers.replies import parse_reply, validate_reply

__all__ = ["INLINE_CHECK_BYTES", "MAX_TEMPERATURE", "SCHEMA_CACHE_SIZE", "CallChecks", "check_request"]

SCHEMA_CACHE_SIZE = 256
"""Distinct schema texts remembered as checked (with their validators)."""
INLINE_CHECK_BYTES = 8 * 1024
"""A request whose unchecked JSON is at most this large is checked on the event loop."""

MAX_TEMPERATURE = 2.0
_Checked = tuple[dict[str, Any], Draft202012Validator]


def check_request(req: ModelRequest, options: CallOptions, config: Config) -> int | None:
    """The output budget asked for; InvalidInput for what is wrong (the JSON fields: ``CallChecks``)."""
    if not req.model.strip():
        raise InvalidInput("model", req.model, "must name a catalog model: " + ", ".join(config.catalog))
    if not req.messages:
        raise InvalidInput("messages", "", "must hold at least one message")
    for i, m in enumerate(req.messages):
        if m.role is Role.UNSPECIFIED:
            raise InvalidInput(
                f"messages[{i}].role", "ROLE_UNSPECIFIED", "must be ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL"
            )
    for i, t in enumerate(req.tools):
        if not t.name:
            raise InvalidInput(f"tools[{i}].name", "", "must name the tool")
    max_tokens = req.max_output_tokens
    model = config.models.get(req.model)
    if max_tokens is not None and (max_tokens == 0 or (model and max_tokens > model.max_output_tokens)):
        top = model.max_output_tokens if model else "the model's maximum"
        raise InvalidInput("max_output_tokens", str(max_tokens), f"must be between 1 and {top}")
    if options.upstream_retries is not None and options.upstream_retries > MAX_UPSTREAM_RETRIES:
        raise InvalidInput(
            "job.upstream_retries", str(options.upstream_retries), f"must be at most {MAX_UPSTREAM_RETRIES}"
        )
    if req.temperature is not None and not 0.0 <= req.temperature <= MAX_TEMPERATURE:
        raise InvalidInput("temperature", str(req.temperature), "must be between 0 and 2")
    return max_tokens


@dataclass(slots=True)
class _Work:
    """What one request's check is at (for naming the field when the time limit strikes) and found."""

    name: str = ""
    text: str = ""
    checked: dict[str, _Checked] = field(default_factory=dict)


class CallChecks:
    """The checks of CallModel's requests and replies, with the schemas already checked."""

    def __init__(self, max_bytes: int, limit_s: float) -> None:
        self._max_bytes = max_bytes
        self._limit_s = limit_s
        self._cache: OrderedDict[str, _Checked] = OrderedDict()

    async def request(self, req: ModelRequest) -> dict[str, Any] | None:
        """The response schema (or None); InvalidInput naming the first field that breaks a bound."""
        fields = [(f"tools[{i}].parameters_json", t.parameters_json) for i, t in enumerate(req.tools)]
        if req.response_schema_json:
            fields.append(("response_schema_json", req.response_schema_json))
        known = {text: self._cache[text] for _, text in fields if text in self._cache}  # read on the event loop
        todo = [(name, text) for name, text in fields if text and text not in known]
        calls = [
            (f"messages[{i}].tool_calls[{j}].arguments_json", c.arguments_json)
            for i, m in enumerate(req.messages)
            for j, c in enumerate(m.tool_calls)
            if c.arguments_json
        ]
        work = _Work()

        def run() -> None:
            for name, text in fields:
                if text:
                    work.name, work.text = name, text
                    work.checked[text] = known.get(text) or self._schema(name, text)
            for name, text in calls:
                work.name, work.text = name, text
                self._arguments(name, text)

        size = sum(len(text) for _, text in todo) + sum(len(text) for _, text in calls)
        try:
            if size <= INLINE_CHECK_BYTES:
                checks(run, self._limit_s)
            else:
                await off_loop(run, self._limit_s)
        except TooCostly as exc:
            raise InvalidInput(
                work.name, work.text, f"must be quicker to check: checking it took longer than {exc.limit_s:g} s"
            ) from None
        for text, checked in work.checked.items():  # the cache is touched on the event loop only
            self._remember(text, checked)
        text = req.response_schema_json
        return work.checked[text][0] if text else None

    async def reply(
        self, text: str, schema: dict[str, Any], model: str, schema_text: str
    ) -> tuple[dict[str, Any], ResponseValidation | None]:
        """The reply parsed and judged against ``schema`` (the text it came from: ``schema_text``).

        Raises JsonParse as ``parse_reply`` does; INVALID_INPUT naming response_schema_json when the
        caller's schema cannot be followed on this reply or takes longer than the time limit.
        """
        checked = self._cache.get(schema_text)
        validator = checked[1] if checked is not None else validator_for(schema)

        def run() -> tuple[dict[str, Any], ResponseValidation | None]:
            parsed = parse_reply(text, schema, model)
            return parsed, validate_reply(parsed, schema, model, validator)

        try:
            return await off_loop(run, self._limit_s)
        except SchemaProblem as exc:
            raise InvalidInput("response_schema_json", schema_text, f"must {exc}") from None
        except TooCostly as exc:
            raise InvalidInput(
                "response_schema_json",
                schema_text,
                f"must be quicker to check a reply against: checking the reply took longer than {exc.limit_s:g} s",
            ) from None

    # ------------------------------------------------------------------ in the worker

    def _schema(self, name: str, text: str) -> _Checked:
        schema = load_json(text, name, max_bytes=self._max_bytes, expected="a JSON schema object")
        problem = check_schema(schema)
        if problem is not None:
            raise InvalidInput(name, text, f"must {problem}")
        return schema, validator_for(schema)

    def _arguments(self, name: str, text: str) -> None:
        size = len(text) if len(text) > self._max_bytes else json_bytes(text)
        if size > self._max_bytes:
            raise InvalidInput(name, text, f"must be at most {self._max_bytes} bytes of JSON (got {size})")
        if nested_over(text, MAX_JSON_DEPTH):  # before json.loads, which would recurse as deep (json_input)
            raise InvalidInput(name, text, f"must be nested at most {MAX_JSON_DEPTH} levels deep")
        try:
            json.loads(text)
        except ValueError:  # not JSON: sent on as the model wrote it (an adapter keeps it as raw text)
            return

    def _remember(self, text: str, checked: _Checked) -> None:
        self._cache[text] = checked
        self._cache.move_to_end(text)
        while len(self._cache) > SCHEMA_CACHE_SIZE:
            self._cache.popitem(last=False)
