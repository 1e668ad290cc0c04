"""Shared fixtures: the fakes on loopback, a sidecar on real gRPC with an injected clock."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from sidecar_client import AsyncSidecarClient

from sidecar.config import Config
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import SidecarApp, running

FAST = {"rate_limit": [5, 30], "overload": [15, 90], "transient": [5, 30]}
ANSWER_MARGIN_S = 30.0
"""``fail_fetch``'s and ``fail_search``'s read timeout: the fake backend answers a fault mode in milliseconds, so
no machine, however slow or busy, turns an answer into a timeout; only a service that never answers times out."""
SILENCE_S = 0.2
"""A read timeout for a service that never answers (``hang``): the timeout is the only way such a call ends, so
the outcome is the same on any machine (a slower one only takes longer to get there)."""


SETTLE_S = 60.0
"""How long a test waits (real time) for the sidecar to reach a state it is sure to reach: generous, since
only a bug takes that long, and a slow or busy machine must not fail a test by being slow."""


async def until(condition: Callable[[], bool], what: str, within_s: float = SETTLE_S) -> None:
    """Poll ``condition`` (the calls cross real sockets) until it holds; fail naming ``what`` past ``within_s``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + within_s
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"not within {within_s:g} s: {what}")
        await asyncio.sleep(0.005)


async def timer_set(clock: FakeClock, what: str, due_within_s: float | None = None) -> None:
    """Until a timer is set on ``clock`` (falling due within ``due_within_s`` from now, when given): the waiter
    the test is about to advance the clock for is waiting (an advance before it would pass it by; an idle
    sidecar sets none)."""
    await until(
        lambda: any(due_within_s is None or when <= clock.now + due_within_s for when in clock.timers),
        f"{what}: its timer set",
    )


def tool(url: str, kind: str = "fetch", service: str = "svc", method: str = "GET", **extra: Any) -> dict[str, Any]:
    params = extra.pop(
        "parameters",
        {
            "type": "object",
            "properties": {"id": {"type": "string", "minLength": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
    )
    return {
        "description": f"{kind} tool",
        "kind": kind,
        "service": service,
        "method": method,
        "url": url,
        "parameters": params,
        **extra,
    }


ONE_TOOL = (
    "tools: {unused: {description: a tool no test calls, kind: search, service: unused, "
    "url: 'http://127.0.0.1:9/search'}}\n"
)
"""A YAML line that makes a config file serve something, for a test of another section: a file with no
model and no tool is refused (``sidecar.config.serving``)."""


def fail_tool(tools_url: str, kind: str = "fetch", timeout_s: float = ANSWER_MARGIN_S) -> dict[str, Any]:
    """The fake backend's ``/fail/{mode}`` as a tool of the ``flaky`` service (``fail_fetch``, ``fail_search``)."""
    mode = {"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]}
    return tool(tools_url + "/fail/{mode}", kind, "flaky", parameters=mode, timeout_s=timeout_s)


def silent_tools(tools_url: str) -> dict[str, Any]:
    """``tools=`` for ``start_sidecar``: ``fail_fetch`` waits SILENCE_S for an answer (for its ``hang`` mode)."""
    return {"fail_fetch": fail_tool(tools_url, "fetch", SILENCE_S)}


def base_config(provider_url: str, tools_url: str, **sections: Any) -> dict[str, Any]:
    """A config with both wire formats and a tool per mapping row, against the fakes."""
    query = {"type": "object", "properties": {"query": {"type": "string", "minLength": 1}}, "required": ["query"]}
    cfg: dict[str, Any] = {
        "server": {"listen": "127.0.0.1:0", "grace_period_s": 5},
        "policy": {"upstream_retries": 3, "tool_retries": 2},
        "providers": {
            "oai": {
                "wire_format": "openai",
                "base_url": provider_url + "/v1",
                "api_key": "sk-test-SECRETKEY1234567890",
            },
            "ant": {"wire_format": "anthropic", "base_url": provider_url, "api_key": "sk-ant-SECRETKEY1234567890"},
        },
        "models": {
            "gpt": {
                "provider": "oai",
                "upstream_model": "fake-gpt",
                "context_window": 8000,
                "max_output_tokens": 2048,
                "default_output_tokens": 256,
                "input_price_per_mtok": 1.0,
                "output_price_per_mtok": 2.0,
            },
            "claude": {
                "provider": "ant",
                "upstream_model": "fake-claude",
                "context_window": 8000,
                "max_output_tokens": 2048,
                "default_output_tokens": 256,
            },
        },
        "services": {
            "flaky": {
                "quirks": [
                    {
                        "status": 403,
                        "body_contains": "RobotDetected",
                        "kind": "UPSTREAM_THROTTLE",
                        "detail": "robot detection",
                    }
                ]
            }
        },
        "tools": {
            "search": tool(tools_url + "/search?q={query}", "search", "docs", parameters=query),
            "fetch": tool(tools_url + "/docs/{id}", "fetch", "docs", resource_type="document"),
            "fail_fetch": fail_tool(tools_url, "fetch"),
            "fail_search": fail_tool(tools_url, "search"),
            "note": tool(
                tools_url + "/notes",
                "fetch",
                "notes",
                "POST",
                body="arguments",
                parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            ),
            "refused": tool("http://127.0.0.1:1/x/{id}", "fetch", "down"),
            "dns": tool("http://nonexistent.invalid/x/{id}", "fetch", "nowhere"),
        },
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


@pytest.fixture
def provider() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


@pytest.fixture
def backend() -> Iterator[ThreadedServer[FakeToolBackend]]:
    with ThreadedServer(FakeToolBackend()) as srv:
        yield srv


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@dataclass
class Running:
    app: SidecarApp
    client: AsyncSidecarClient
    clock: FakeClock
    provider: FakeProvider
    backend: FakeToolBackend


Start = Callable[..., Awaitable[Running]]


@pytest_asyncio.fixture
async def start_sidecar(
    provider: ThreadedServer[FakeProvider], backend: ThreadedServer[FakeToolBackend], clock: FakeClock
) -> AsyncIterator[Start]:
    """``await start_sidecar(**sections)``: a sidecar on real gRPC, fakes behind it, a fake clock."""
    stack: list[tuple[Any, AsyncSidecarClient]] = []

    async def start(**sections: Any) -> Running:
        cfg = Config.model_validate(base_config(provider.url, backend.url, **sections))
        ctx = running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7))
        app = await ctx.__aenter__()
        client = AsyncSidecarClient(app.address)
        stack.append((ctx, client))
        return Running(app, client, clock, provider.server, backend.server)

    yield start
    for ctx, client in reversed(stack):
        await client.close()
        await ctx.__aexit__(None, None, None)


@pytest_asyncio.fixture
async def sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar()
