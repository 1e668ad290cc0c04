"""Every format's front reads any JSON value in any position of a request: a request, or INVALID_INPUT naming it.

The requests are the wire tests' (``tests/unit/shapes.py``: every shape a format carries, as its
upstream sends it, so its front reads each one back). A *position* is one path into one of them; each
path shape (list indices aside) is taken once, from the first request holding it.

    test               what is put at every position (or as a new key    what must come back
                       of every object)
    the sweeps         each value of TYPE_CONFUSIONS; each of a few      an Ask, or INVALID_INPUT naming the
                       under every key of the format                     position, a field inside it or the
                                                                         object holding it
    text is text       a string replaced by an object, a number or a     INVALID_INPUT (outside the free
                       boolean                                           JSON of FREE_JSON)
    any value          each JSON value hypothesis draws (nested, lone    an Ask or a SidecarFailure, never
                       surrogates, huge numbers, words, keys of the      another exception
                       format and others), and under a key it draws

A dict looked up with a caller's object (``value not in {"auto": ...}``) raised TypeError
(unhashable), which the doors answered 500; ``str(value or "")`` read an object as its Python repr
and ``value or ""`` an empty object as absent. Both are what these hold the fronts to.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.core.details import InvalidInputDetail
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.formats.protocol import Ask
from sidecar.providers.formats.registry import FORMATS
from tests.unit.shapes import SHAPES, as_sent, chat, features
from tests.unit.test_formats import NAMES, REFUSED_BY_RULE, sent, upstream

Path = tuple[str | int, ...]

TYPE_CONFUSIONS: list[Any] = [{}, {"type": {}}, [], [{}], [[]], ["auto"], 7, -1, 2.5, 10**30, True, False, None, "",
                              "\ud800"]  # fmt: skip
"""Values of each JSON type, an empty container of each, a container in a word's place, a lone surrogate."""
FREE_JSON = frozenset({"input_schema", "parameters", "inputSchema", "parametersJsonSchema", "responseJsonSchema",
                       "schema", "input", "args", "arguments", "response", "json"})  # fmt: skip
"""Keys under which a request holds any JSON of the caller's (a schema, a call's arguments, a tool's
answer): what is inside is read as JSON, not as the format's fields."""


# ----------------------------------------------------------------------------- the requests and their positions


@cache
def requests(name: str) -> tuple[dict[str, Any], ...]:
    """Every shape's request a format carries, as its upstream sends it and its front reads it."""
    fmt = FORMATS[name]
    out = []
    for shape, request in SHAPES.items():
        if features(request) <= upstream(fmt).carries and shape not in REFUSED_BY_RULE.get(name, ()):
            body = sent(fmt, chat(as_sent(request)))
            fmt.front.parse(copy.deepcopy(body))  # as test_formats proves: read back
            out.append(body)
    return tuple(out)


def _walk(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _walk(child, (*path, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _walk(child, (*path, i))


@cache
def positions(name: str) -> tuple[tuple[dict[str, Any], Path, Any], ...]:
    """(request, path, the value there) for each path shape of the format's requests, once."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for body in requests(name):
        for path, value in _walk(body):
            shape = tuple("#" if isinstance(p, int) else p for p in path)
            if path and shape not in seen:
                seen.add(shape)
                out.append((body, path, value))
    return tuple(out)


@cache
def keys(name: str) -> tuple[str, ...]:
    """Every key of the format's own the requests hold (none from inside FREE_JSON)."""
    return tuple(sorted({path[-1] for _, path, _ in positions(name) if isinstance(path[-1], str) and not _free(path)}))


def dotted(path: Path) -> str:
    """A path as the fronts name it: ``messages[0].content[1].type``."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def with_value(body: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    node: Any = changed
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = copy.deepcopy(value)
    return changed


def read(name: str, body: dict[str, Any]) -> Ask | SidecarFailure:
    """The front's reading of ``body``: its Ask or its failure; anything else raised fails the test."""
    try:
        return FORMATS[name].front.parse(body)
    except SidecarFailure as failure:
        return failure


def named(failure: SidecarFailure) -> str:
    assert isinstance(failure, InvalidInput), failure
    assert isinstance(failure.detail, InvalidInputDetail)
    return failure.detail.parameter


def on_the_branch(parameter: str, path: str) -> bool:
    """Whether ``parameter`` names ``path``, a field inside it, or an object holding it."""
    inner, outer = (parameter, path) if len(parameter) >= len(path) else (path, parameter)
    return inner == outer or inner.startswith((outer + ".", outer + "["))


def _free(path: Path) -> bool:
    """Whether ``path`` is inside the free JSON of a FREE_JSON key."""
    return any(p in FREE_JSON for p in path[:-1])


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", NAMES)
def test_every_format_has_requests_to_change(name: str) -> None:
    assert len(requests(name)) >= 10
    assert len(positions(name)) >= 60


@pytest.mark.parametrize("name", NAMES)
def test_a_value_of_any_type_at_any_position_is_read_or_refused_naming_it(name: str) -> None:
    wrong = []
    for body, path, _ in positions(name):
        for value in TYPE_CONFUSIONS:
            answer = read(name, with_value(body, path, value))
            if value is None:  # null is absent: a rule of another field may miss it (a schema without its type)
                continue
            if isinstance(answer, SidecarFailure) and not on_the_branch(named(answer), dotted(path)):
                wrong.append((dotted(path), value, named(answer)))
    assert not wrong, wrong[:20]


@pytest.mark.parametrize("name", NAMES)
def test_a_new_key_of_any_type_in_any_object_is_read_or_refused_naming_it(name: str) -> None:
    wrong = []
    for body, path, value in positions(name):
        if not isinstance(value, dict) or _free((*path, "")):
            continue
        for key in keys(name):
            if key in value:
                continue
            for confused in ({}, [], ["auto"], 7, True):
                answer = read(name, with_value(body, (*path, key), confused))
                if isinstance(answer, SidecarFailure) and not on_the_branch(named(answer), dotted((*path, key))):
                    wrong.append((dotted((*path, key)), confused, named(answer)))
    assert not wrong, wrong[:20]


@pytest.mark.parametrize("name", NAMES)
def test_text_is_never_read_from_an_object_a_number_or_a_boolean(name: str) -> None:
    read_anyway = []
    for body, path, value in positions(name):
        if not isinstance(value, str) or _free(path) or path[-1] in FREE_JSON:
            continue
        for confused in ({}, {"text": value}, 7, True):
            if isinstance(read(name, with_value(body, path, confused)), Ask):
                read_anyway.append((dotted(path), confused))
    assert not read_anyway, read_anyway[:20]


LONE = ["\ud800", "\udfff", "a\udc00b"]
WORDS = [*LONE, "auto", "any", "tool", "none", "function", "user", "assistant", "text", "image"]
json_keys = st.one_of(st.text(max_size=6), st.sampled_from(["type", "name", "text", *LONE]))
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.sampled_from(WORDS),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(json_keys, inner, max_size=3)),
    max_leaves=8,
)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, key=st.integers(min_value=0))
def test_any_json_value_at_every_position_is_an_ask_or_a_failure(name: str, value: Any, key: int) -> None:
    """The value drawn, at each position in turn, and as one new key (drawn) of each object."""
    new = keys(name)[key % len(keys(name))]
    for body, path, there in positions(name):
        read(name, with_value(body, path, value))
        if isinstance(there, dict) and new not in there and not _free((*path, new)):
            read(name, with_value(body, (*path, new), value))
