"""Values built from JSON schemas (the brain's JSON answers and tool arguments)."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.fakes._schema import example_for, missing_fields_for, tool_arguments_for


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "example"),
        ({"type": "string", "minLength": 10}, "examplexxx"),
        ({"type": "string", "maxLength": 3}, "exa"),
        ({"type": "string", "format": "date"}, "2024-01-01"),
        ({"type": "integer", "minimum": 5}, 5),
        ({"type": "integer", "exclusiveMaximum": 0}, -1),
        ({"type": "number"}, 1),
        ({"type": "boolean"}, True),
        ({"type": "null"}, None),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 42}, 42),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, 1),
        ({"type": ["null", "boolean"]}, True),
        ({"type": "array", "items": {"type": "integer"}}, []),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1, 1]),
        (
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]},
            {"b": 1},
        ),
        ({"properties": {"a": {"type": "object", "properties": {"c": {"type": "boolean"}}}}}, {"a": {"c": True}}),
        (
            {
                "allOf": [
                    {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            },
            {"a": "example", "b": 1},
        ),
    ],
)
def test_example_for(schema: dict[str, Any], expected: Any) -> None:
    assert example_for(schema) == expected


def test_recursive_refs_stop() -> None:
    schema = {
        "$ref": "#/$defs/node",
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]}},
    }
    value = example_for(schema)
    depth = 0
    while value:
        value, depth = value["next"], depth + 1
    assert 0 < depth <= 10


def test_tool_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "id": {"type": "string"},
            "documentId": {"type": "string"},
            "n": {"type": "integer"},
            "flag": {"type": "boolean"},
            "opts": {"type": "object", "properties": {"lang": {"type": "string", "enum": ["en", "fr"]}}},
        },
    }
    assert tool_arguments_for(schema, "the question") == {
        "query": "the question",
        "id": "doc-1",
        "documentId": "doc-1",
        "n": 1,
        "flag": True,
        "opts": {"lang": "en"},
    }
    assert tool_arguments_for({}, "x") == {}


def test_missing_fields() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "integer"}},
        "required": ["a", "b", "c"],
    }
    assert missing_fields_for(schema) == {"b": ""}
