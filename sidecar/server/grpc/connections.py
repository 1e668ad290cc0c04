"""The gRPC port's connection limits (``server.connections``), as gRPC core's channel arguments.

    key                   channel argument                              what a connection past it gets
    max_connections       grpc.max_allowed_incoming_connections         a new one is closed as it is accepted
    handshake_timeout_s   grpc.server_handshake_timeout_ms              closed (TLS or the preface unfinished)
    idle_timeout_s        grpc.max_connection_idle_ms                   GOAWAY, closed (no call this long)
    max_age_s             grpc.max_connection_age_ms (±10 % jitter)     GOAWAY: new calls go to a new connection
    age_grace_s           grpc.max_connection_age_grace_ms              calls still running are cut, UNAVAILABLE
    keepalive_time_s      grpc.keepalive_time_ms                        pinged after this much silence
                          grpc.http2.max_pings_without_data = 0         (and again, however long the silence)
    keepalive_timeout_s   grpc.keepalive_timeout_ms,                    closed when a ping goes unanswered
                          grpc.http2.ping_timeout_ms                    (the second is the one gRPC core reads)
    min_ping_interval_s   grpc.http2.min_ping_interval_without_data_ms  GOAWAY too_many_pings (third ping sooner)
                          grpc.keepalive_permit_without_calls = 1       (a ping with no call is no strike)

gRPC core enforces them all; none reaches this process (no log line, no metric of ours). Each is a
32-bit count of milliseconds: the configuration bounds every limit at a day.
"""

from __future__ import annotations

import math

from sidecar.config import GrpcConnectionsConfig

__all__ = ["connection_options"]


def connection_options(limits: GrpcConnectionsConfig) -> list[tuple[str, int]]:
    """The channel arguments of the module's table for ``grpc.aio.server(options=...)``."""
    options = [
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
        ("grpc.server_handshake_timeout_ms", _ms(limits.handshake_timeout_s)),
        ("grpc.max_connection_idle_ms", _ms(limits.idle_timeout_s)),
        ("grpc.keepalive_time_ms", _ms(limits.keepalive_time_s)),
        ("grpc.keepalive_timeout_ms", _ms(limits.keepalive_timeout_s)),
        ("grpc.http2.ping_timeout_ms", _ms(limits.keepalive_timeout_s)),  # else an unanswered ping waits 60 s
        ("grpc.http2.max_pings_without_data", 0),  # else a call silent for two pings is pinged no more
        ("grpc.http2.min_ping_interval_without_data_ms", _ms(limits.min_ping_interval_s)),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    if limits.max_age_s is not None:
        options.append(("grpc.max_connection_age_ms", _ms(limits.max_age_s)))
        options.append(("grpc.max_connection_age_grace_ms", _ms(limits.age_grace_s)))
    return options


def _ms(seconds: float) -> int:
    """Whole milliseconds, at least 1 (0 would turn some of them off)."""
    return max(1, math.ceil(seconds * 1000))
