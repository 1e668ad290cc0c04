"""``server/http/connections.py`` alone: which connection each limit closes, in what order, and what is said.

Time is a number the test moves; a transport is a stand-in that records its close. The process test,
tests/fronts/test_slow_clients.py, runs the same limits on real sockets.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from sidecar.config import HttpConnectionsConfig
from sidecar.server.http.connections import LOG_WINDOW_S, Connection, Connections, Phase


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


class Port:
    """``Connections`` on a clock the test moves, the reasons it counted."""

    def __init__(self, **limits: float) -> None:
        self.now = 0.0
        self.counted: list[str] = []
        config = HttpConnectionsConfig.model_validate({"head_timeout_s": 10, "body_timeout_s": 20, **limits})
        self.connections = Connections(config, closed=self.counted.append, now=lambda: self.now)

    def open(self, phase: Phase = Phase.IDLE) -> Connection:
        conn = self.connections.opened(Transport())
        self.connections.enter(conn, phase)
        return conn

    def at(self, when: float) -> None:
        self.now = when
        self.connections.expire()


def closes(conn: Connection) -> int:
    assert isinstance(conn.transport, Transport)
    return conn.transport.closes


def test_each_phase_is_closed_past_its_own_limit_and_an_answer_never() -> None:
    port = Port(idle_timeout_s=30)
    idle, head, body, answering = (port.open(p) for p in (Phase.IDLE, Phase.HEAD, Phase.BODY, Phase.ANSWERING))
    port.at(9.9)
    assert [closes(c) for c in (idle, head, body, answering)] == [0, 0, 0, 0]
    port.at(10)
    assert [closes(c) for c in (idle, head, body, answering)] == [0, 1, 0, 0]
    port.at(20)
    assert [closes(c) for c in (idle, head, body, answering)] == [0, 1, 1, 0]
    port.at(30)
    assert [closes(c) for c in (idle, head, body, answering)] == [1, 1, 1, 0]
    port.at(86_400)
    assert closes(answering) == 0
    assert port.counted == ["head_timeout", "body_timeout", "idle_timeout"]
    assert len(port.connections) == 1


def test_a_phase_is_timed_from_when_it_was_entered() -> None:
    port = Port()
    conn = port.open(Phase.HEAD)
    port.now = 8
    port.connections.enter(conn, Phase.BODY)  # the head read at 8: its body has until 28
    port.at(27.9)
    assert closes(conn) == 0
    port.connections.enter(conn, Phase.BODY)  # still the body: its time is not restarted
    port.at(28)
    assert closes(conn) == 1
    assert port.counted == ["body_timeout"]


def test_past_the_cap_the_longest_idle_goes_first_then_a_head_then_the_new_one() -> None:
    port = Port(max_connections=4)
    first = port.open()
    port.now = 1
    head = port.open(Phase.HEAD)
    port.now = 2
    second = port.open()
    busy = port.open(Phase.BODY)
    port.connections.enter(first, Phase.ANSWERING)
    port.connections.enter(first, Phase.IDLE)  # idle again, later than ``second``
    one = port.open()
    assert (closes(second), closes(first), closes(head)) == (1, 0, 0)
    two = port.open()
    assert (closes(first), closes(head)) == (1, 0)
    for conn in (one, two, busy):
        port.connections.enter(conn, Phase.BODY)
    newest = port.open()  # none idle but itself: the head goes
    assert (closes(head), closes(newest)) == (1, 0)
    port.open()  # ``newest`` is idle: it goes
    assert closes(newest) == 1
    assert port.counted == ["evicted"] * 4
    assert [closes(c) for c in (one, two, busy)] == [0, 0, 0]
    assert len(port.connections) == 4


def test_with_every_connection_busy_the_new_one_is_closed() -> None:
    port = Port(max_connections=2)
    busy = [port.open(Phase.BODY), port.open(Phase.ANSWERING)]
    new = port.open()
    assert closes(new) == 1
    assert new.phase is Phase.CLOSED
    assert [closes(c) for c in busy] == [0, 0]
    assert port.counted == ["refused"]
    assert len(port.connections) == 2
    port.connections.enter(new, Phase.HEAD)  # what a closed connection is told later changes nothing
    port.connections.lost(new)
    assert len(port.connections) == 2


def test_a_lost_connection_is_forgotten() -> None:
    port = Port()
    conn = port.open(Phase.HEAD)
    port.connections.lost(conn)
    port.at(100)
    assert closes(conn) == 0
    assert len(port.connections) == 0
    assert port.counted == []


def test_a_flood_is_one_line_per_reason_per_window(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sidecar.server")
    port = Port(max_connections=2000)
    for _ in range(1000):
        port.open(Phase.HEAD)
    for _ in range(500):
        port.open(Phase.BODY)
    port.at(20)
    assert port.counted.count("head_timeout") == 1000
    lines = [r for r in caplog.records if getattr(r, "reason", None) == "head_timeout"]
    assert len(lines) == 1  # the first at once
    assert lines[0].levelno == logging.WARNING
    assert "http.connections.head_timeout_s" in lines[0].getMessage()
    assert len([r for r in caplog.records if getattr(r, "reason", None) == "body_timeout"]) == 1
    port.at(20 + LOG_WINDOW_S)  # the rest of the window, counted in one line
    lines = [r for r in caplog.records if getattr(r, "reason", None) == "head_timeout"]
    assert [getattr(r, "closed", None) for r in lines] == [1, 999]
    port.at(20 + 3 * LOG_WINDOW_S)  # nothing more closed: nothing more said
    assert len(caplog.records) == 4


def test_idle_closes_are_info(caplog: pytest.LogCaptureFixture) -> None:
    """An idle connection closed is a client's pool left open, not an attack: INFO, not WARNING."""
    caplog.set_level(logging.INFO, logger="sidecar.server")
    port = Port(idle_timeout_s=5)
    port.open()
    port.at(5)
    assert [(r.levelno, getattr(r, "reason", None)) for r in caplog.records] == [(logging.INFO, "idle_timeout")]


def test_the_check_runs_a_tenth_of_the_shortest_limit_apart_within_bounds() -> None:
    assert Port(head_timeout_s=1, idle_timeout_s=1, body_timeout_s=1).connections.tick_s == pytest.approx(0.1)
    assert Port(head_timeout_s=0.01, body_timeout_s=1).connections.tick_s == 0.05
    assert Port().connections.tick_s == 1.0
