"""CallModel's request, checked before anything is sent: each problem an INVALID_INPUT naming its field.

model                  must name a catalog model (the catalog is listed)
messages               at least one; each with a role and text, tool calls or tool results
tools[i]               a name; parameters_json, when given, a JSON schema whose $refs resolve
response_schema_json   when given, a JSON schema object whose $refs resolve
max_output_tokens      1 .. the model's maximum output
job.upstream_retries   at most MAX_UPSTREAM_RETRIES
temperature            0 .. 2
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from sidecar.config import Config
from sidecar.core.conversation import CallOptions, ModelRequest
from sidecar.core.kinds import Role
from sidecar.core.retry import MAX_UPSTREAM_RETRIES
from sidecar.core.taxonomy import InvalidInput

__all__ = ["check_request", "json_schema"]

MAX_TEMPERATURE = 2.0


def check_request(req: ModelRequest, options: CallOptions, config: Config) -> tuple[dict[str, Any] | None, int | None]:
    """The response schema (parsed) and the output budget asked for, or the first problem raised."""
    if not req.model.strip():
        raise InvalidInput("model", req.model, "must name a catalog model: " + ", ".join(sorted(config.models)))
    if not req.messages:
        raise InvalidInput("messages", "", "must hold at least one message")
    for i, m in enumerate(req.messages):
        if m.role is Role.UNSPECIFIED:
            raise InvalidInput(
                f"messages[{i}].role", "ROLE_UNSPECIFIED", "must be ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL"
            )
        if not (m.text or m.tool_calls or m.tool_results):
            raise InvalidInput(f"messages[{i}]", "", "must carry text, tool calls or tool results")
    for i, t in enumerate(req.tools):
        if not t.name:
            raise InvalidInput(f"tools[{i}].name", "", "must name the tool")
        if t.parameters_json:
            json_schema(f"tools[{i}].parameters_json", t.parameters_json)
    schema = json_schema("response_schema_json", req.response_schema_json) if req.response_schema_json else None
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
    return schema, max_tokens


def json_schema(field_name: str, text: str) -> dict[str, Any]:
    """``text`` as a JSON schema object, or InvalidInput naming the field and what is wrong."""
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(field_name, text, f"must be a JSON schema object ({exc.msg})") from None
    except RecursionError:
        raise InvalidInput(field_name, text[:80], "must be a JSON schema object nested less deeply") from None
    if not isinstance(schema, dict):
        raise InvalidInput(field_name, text, "must be a JSON schema object")
    try:
        Draft202012Validator.check_schema(schema)
        unresolved = [ref for ref in _refs(schema) if _unresolvable(schema, ref)]
    except SchemaError as exc:
        raise InvalidInput(field_name, text, f"must be a valid JSON schema ({exc.message})") from None
    if unresolved:
        raise InvalidInput(field_name, text, f"must resolve every $ref (cannot resolve {unresolved[0]})")
    return schema


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _unresolvable(schema: dict[str, Any], ref: str) -> bool:
    resolver = Registry().with_resource("", DRAFT202012.create_resource(schema)).resolver()
    try:
        resolver.lookup(ref)
    except Unresolvable:
        return True
    return False
