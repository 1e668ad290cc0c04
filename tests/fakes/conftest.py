"""Fixtures: each fake runs on its own loop in a thread; tests talk plain HTTP to it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer


@pytest.fixture
def provider() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


@pytest.fixture
def tools() -> Iterator[ThreadedServer[FakeToolBackend]]:
    with ThreadedServer(FakeToolBackend()) as srv:
        yield srv


@pytest.fixture(scope="session")
def client() -> Iterator[httpx.Client]:
    # Plain HTTP on loopback only: skipping the CA bundle saves ~40 ms per client.
    with httpx.Client(timeout=5.0, verify=False) as c:
        yield c
