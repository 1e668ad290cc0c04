"""The cases cannot lean on each other's throttle state: a model a case presses is that case's alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance_cases import load_cases


def _case(directory: Path, stem: str, model: str, steps: list[dict[str, object]] | None) -> None:
    data: dict[str, object] = {
        "name": stem,
        "rpc": "CallModel",
        "request": {"model": model, "messages": [{"role": "ROLE_USER", "text": "hi"}]},
        "expect": {"grpc_code": "OK"},
    }
    if steps is not None:
        data["setup"] = {"provider": [{"model": model, "steps": steps}]}
    (directory / f"{stem}.json").write_text(json.dumps(data))


def test_a_case_that_presses_a_model_another_case_calls_is_refused(tmp_path: Path) -> None:
    _case(tmp_path, "a_rate_limited", "gpt-shared", [{"preset": "rate_limit", "repeat": 4}])
    _case(tmp_path, "b_reply", "gpt-shared", None)
    with pytest.raises(ValueError, match=r"a_rate_limited\.json presses \['gpt-shared'\], which b_reply\.json"):
        load_cases(tmp_path)


def test_cases_that_only_get_replies_may_share_a_model(tmp_path: Path) -> None:
    _case(tmp_path, "a_reply", "gpt-shared", [{"preset": "bad_json", "repeat": 3}])
    _case(tmp_path, "b_reply", "gpt-shared", None)
    _case(tmp_path, "c_own", "gpt-own", [{"status": 503}])
    assert [c.name for c in load_cases(tmp_path)] == ["a_reply", "b_reply", "c_own"]


def test_every_shipped_case_presses_only_a_model_of_its_own() -> None:
    assert len(load_cases(Path(__file__).parent / "cases")) > 0  # load_cases raises when two share one


def test_a_route_case_presses_the_deployments_it_scripts(tmp_path: Path) -> None:
    data = {
        "name": "a_route",
        "rpc": "CallModel",
        "setup": {"provider": [{"model": "gpt-deployment", "steps": [{"preset": "overloaded", "repeat": 4}]}]},
        "request": {"model": "some-route", "messages": [{"role": "ROLE_USER", "text": "hi"}]},
        "expect": {"grpc_code": "OK"},
    }
    (tmp_path / "a_route.json").write_text(json.dumps(data))
    _case(tmp_path, "b_reply", "gpt-deployment", None)
    with pytest.raises(ValueError, match=r"a_route\.json presses \['gpt-deployment'\], which b_reply\.json"):
        load_cases(tmp_path)


def test_a_mid_stream_fault_presses_the_model_a_stream_case_calls(tmp_path: Path) -> None:
    data = {
        "name": "a_stream",
        "rpc": "StreamModel",
        "setup": {"provider": [{"model": "gpt-shared", "steps": [{"stream_fault": "drop", "after_deltas": 2}, {}]}]},
        "request": {"model": "gpt-shared", "messages": [{"role": "ROLE_USER", "text": "hi"}]},
        "expect": {"grpc_code": "OK"},
    }
    (tmp_path / "a_stream.json").write_text(json.dumps(data))
    _case(tmp_path, "b_reply", "gpt-shared", None)
    with pytest.raises(ValueError, match=r"a_stream\.json presses \['gpt-shared'\], which b_reply\.json"):
        load_cases(tmp_path)


def test_a_stream_that_still_ends_well_presses_nothing(tmp_path: Path) -> None:
    steps = [{"stream_fault": "truncated", "after_deltas": 2}, {"stream_fault": "unknown_event"}]
    _case(tmp_path, "a_reply", "gpt-shared", steps)
    _case(tmp_path, "b_reply", "gpt-shared", None)
    assert [c.name for c in load_cases(tmp_path)] == ["a_reply", "b_reply"]


def test_cancel_after_events_is_a_stream_cases_own(tmp_path: Path) -> None:
    _case(tmp_path, "a_call", "gpt-test", None)
    data = json.loads((tmp_path / "a_call.json").read_text())
    (tmp_path / "a_call.json").write_text(json.dumps({**data, "cancel_after_events": 2}))
    with pytest.raises(ValueError, match="cancel_after_events is a StreamModel case's"):
        load_cases(tmp_path)


def _build_case(directory: Path, build: dict[str, object], expect: dict[str, object] | None = None) -> None:
    data = {
        "name": "a build",
        "rpc": "Build",
        "request": {"model": "gpt-test"},
        "build": build,
        "expect": expect or {"request": {"model": "gpt-test"}},
    }
    (directory / "a_build.json").write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        ({"messages": [{"user": "hi", "imgaes": []}]}, "a step is one of user, assistant, tool_results"),
        ({"messages": [{"user": "hi", "images": [{"data": "aGk=", "url": "https://x"}]}]}, "exactly one of data"),
        ({"messages": [{"user": "hi", "images": [{"file": "pixel.png", "detail": "max"}]}]}, "detail is auto"),
        ({"messages": [{"user": "hi", "cache": "10m"}]}, "cache is true, '5m' or '1h'"),
        ({"options": {"temprature": 1}}, r"build.options: unknown \['temprature'\]"),
        ({"options": {"reasoning": "hard"}}, "reasoning is an effort or a budget"),
        ({"messages": [{"tool_results": [{"call": {}, "content": "x", "outcome": {}}]}]}, "content or outcome"),
    ],
)
def test_a_build_case_with_a_typo_is_refused_naming_it(tmp_path: Path, build: dict[str, object], problem: str) -> None:
    _build_case(tmp_path, build)
    with pytest.raises(ValueError, match=problem):
        load_cases(tmp_path)


def test_a_build_case_expects_a_request_or_a_refusal(tmp_path: Path) -> None:
    _build_case(tmp_path, {"messages": [{"user": "hi"}]}, {"grpc_code": "OK"})
    with pytest.raises(ValueError, match="expects the request built, or refused: true"):
        load_cases(tmp_path)
    _build_case(tmp_path, {"messages": [{"user": "hi"}]}, {"refused": True})
    assert [c.rpc for c in load_cases(tmp_path)] == ["Build"]
