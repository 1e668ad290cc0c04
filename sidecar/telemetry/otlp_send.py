"""Encoded OTLP trace requests (``otlp_wire``) sent to a collector, configured as the SDK's exporters are.

    OtlpSender.from_env("grpc" | "http/protobuf")
    sender.send(request_bytes) -> bool          retried as the SDK retries, within the timeout

The SDK's OTLP exporters take only ``ReadableSpan`` objects and encode them themselves, so the
export child (``offload``) that encodes with ``otlp_wire`` sends with this instead. It reads the
same variables, with the same precedence (the _TRACES_ one, then the general one)::

    OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT      grpc: host:port or a URL (default http://localhost:4317);
                                              http: the general one + /v1/traces, the _TRACES_ one as
                                              it is (default http://localhost:4318/v1/traces)
    OTEL_EXPORTER_OTLP_[TRACES_]HEADERS       k=v,k2=v2 (URL-encoded), on every request
    OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT       seconds per export, retries included (default 10)
    OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION   gzip | none (default none)
    OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE   the CA file for TLS
    OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_KEY / _CLIENT_CERTIFICATE    mTLS
    OTEL_EXPORTER_OTLP_[TRACES_]INSECURE      grpc without a scheme: plaintext when true

gRPC: ``TraceService/Export`` on a channel of grpcio's, the request passed as the bytes it is.
HTTP: POST ``application/x-protobuf`` with the standard library's ``http.client`` (one kept-alive
connection). Retried: gRPC UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, ABORTED,
OUT_OF_RANGE, DATA_LOSS, CANCELLED; HTTP 429, 502, 503, 504 and a dropped connection; backoff 1, 2,
4 s (±20 %) while the timeout allows. A failure is logged without headers (they can hold a key).
"""

from __future__ import annotations

import gzip
import http.client
import logging
import os
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import grpc
from opentelemetry.util.re import parse_env_headers

__all__ = ["OtlpSender"]

_log = logging.getLogger("sidecar.telemetry")
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
DEFAULT_TIMEOUT_S = 10.0
MAX_TRIES = 4
_RETRY_GRPC = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_RETRY_HTTP = frozenset({429, 502, 503, 504})


def _env(name: str) -> str:
    """OTEL_EXPORTER_OTLP_TRACES_{name}, else OTEL_EXPORTER_OTLP_{name}."""
    return (
        os.environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}", "").strip()
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{name}", "").strip()
    )


def _read(path: str) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


@dataclass
class OtlpSender:
    protocol: str
    endpoint: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    gzip: bool = False
    certificate: str = ""
    client_key: str = ""
    client_certificate: str = ""
    insecure: bool = False
    sleep: Callable[[float], None] = time.sleep
    """How a retry waits (a test gives its own)."""
    _channel: grpc.Channel | None = None
    _export: grpc.UnaryUnaryMultiCallable[bytes, bytes] | None = None
    _http: http.client.HTTPConnection | None = None

    @classmethod
    def from_env(cls, protocol: str) -> OtlpSender:
        http_proto = protocol.startswith("http")
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if not endpoint:
            general = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
            if http_proto:
                base = general or "http://localhost:4318"
                endpoint = base.rstrip("/") + "/v1/traces"
            else:
                endpoint = general or "http://localhost:4317"
        try:
            timeout = float(_env("TIMEOUT") or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
        return cls(
            protocol="http/protobuf" if http_proto else "grpc",
            endpoint=endpoint,
            headers=dict(parse_env_headers(_env("HEADERS"), liberal=True)),
            timeout_s=timeout if timeout > 0 else DEFAULT_TIMEOUT_S,
            gzip=_env("COMPRESSION").lower() == "gzip",
            certificate=_env("CERTIFICATE"),
            client_key=_env("CLIENT_KEY"),
            client_certificate=_env("CLIENT_CERTIFICATE"),
            insecure=_env("INSECURE").lower() == "true",
        )

    def send(self, request: bytes) -> bool:
        """Send one ExportTraceServiceRequest; True when the collector took it."""
        deadline = time.monotonic() + self.timeout_s
        for attempt in range(MAX_TRIES):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            retry, why = self._try(request, left)
            if retry is None:
                return True
            backoff = 2**attempt * random.uniform(0.8, 1.2)
            if not retry or attempt + 1 == MAX_TRIES or backoff > deadline - time.monotonic():
                _log.warning("spans not exported to %s: %s", self.endpoint, why)
                return False
            self.sleep(backoff)
        _log.warning("spans not exported to %s: the export timed out", self.endpoint)
        return False

    def _try(self, request: bytes, timeout_s: float) -> tuple[bool | None, str]:
        """(None, "") when sent; else whether to retry, and why not sent."""
        if self.protocol == "grpc":
            return self._try_grpc(request, timeout_s)
        return self._try_http(request, timeout_s)

    # gRPC.

    def _grpc_target(self) -> tuple[str, bool]:
        """The channel's target and whether it is TLS (the SDK's rule: the scheme, else INSECURE)."""
        parts = urlsplit(self.endpoint if "://" in self.endpoint else f"//{self.endpoint}")
        target = parts.netloc or self.endpoint
        if parts.scheme == "https":
            return target, True
        if parts.scheme == "http":
            return target, False
        return target, not self.insecure

    def _stub(self) -> grpc.UnaryUnaryMultiCallable[bytes, bytes]:
        if self._export is None:
            target, tls = self._grpc_target()
            if tls:
                credentials = grpc.ssl_channel_credentials(
                    root_certificates=_read(self.certificate),
                    private_key=_read(self.client_key),
                    certificate_chain=_read(self.client_certificate),
                )
                self._channel = grpc.secure_channel(target, credentials)
            else:
                self._channel = grpc.insecure_channel(target)
            self._export = self._channel.unary_unary(EXPORT_METHOD)
        return self._export

    def _try_grpc(self, request: bytes, timeout_s: float) -> tuple[bool | None, str]:
        export = self._stub()
        compression = grpc.Compression.Gzip if self.gzip else None
        try:
            export(request, timeout=timeout_s, metadata=tuple(self.headers.items()), compression=compression)
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
            return code in _RETRY_GRPC, f"{code.name}"
        return None, ""

    # HTTP.

    def _connection(self, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(self.endpoint)
        path = parts.path or "/v1/traces"
        if parts.query:
            path += f"?{parts.query}"
        if self._http is None:
            host = parts.hostname or "localhost"
            if parts.scheme == "https":
                context = ssl.create_default_context(cafile=self.certificate or None)
                if self.client_certificate:
                    context.load_cert_chain(self.client_certificate, self.client_key or None)
                self._http = http.client.HTTPSConnection(host, parts.port, timeout=timeout_s, context=context)
            else:
                self._http = http.client.HTTPConnection(host, parts.port, timeout=timeout_s)
        self._http.timeout = timeout_s
        return self._http, path

    def _try_http(self, request: bytes, timeout_s: float) -> tuple[bool | None, str]:
        body = gzip.compress(request) if self.gzip else request
        headers = {"Content-Type": "application/x-protobuf", **self.headers}
        if self.gzip:
            headers["Content-Encoding"] = "gzip"
        try:
            connection, path = self._connection(timeout_s)
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as error:
            self.close()
            return True, type(error).__name__
        if 200 <= response.status < 300:
            return None, ""
        return response.status in _RETRY_HTTP, f"HTTP {response.status}"

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._export = None
