"""The fleet's Redis over TLS, with a client certificate and an ACL user whose name and password come
from the environment: a real ``redis-server --tls-port ... --port 0 --tls-auth-clients yes`` with
certificates this test makes (``cryptography``), and ``sidecar serve`` processes.

    mTLS and the ACL user      the replica reaches Redis (reachable in its state view; a capped call's
                               spend lands in Redis), and neither the password nor the user shows in its
                               log, its state view (GET /admin/state), ``sidecar status`` or its metrics
    a CA that did not sign     refused: the replica's WARNING names the certificate check and what to
      the server               check (state.tls.ca_file); calls go on under local state
    no client certificate      refused, the WARNING says the server wants one
    a wrong password           refused, the WARNING names state.username / state.password; never the password
    a state it cannot dial     refused at load, naming the field (url and sentinel both, TLS in the URL's
                               query, tls without rediss://, a file that is not there, a password in the file)
    spans                      in one process: a call's spans and the outage's event hold neither secret
    Sentinel over TLS          a sentinel on a TLS port only, with its own password, names the primary; the
                               replica reaches both with its certificate and the sentinel's password, and logs
                               in to the primary as the ACL user; no password shows

Nothing is timed: each check polls for a state within a bound.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from sidecar_client import AsyncSidecarClient, job, user

from sidecar.config.errors import ConfigError
from sidecar.config.loading import parse_config
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import running
from sidecar.state.redis import keys
from sidecar.telemetry.testing import install_in_memory
from tests.conftest import base_config
from tests.redis_server import REDIS_SERVER, START_TIMEOUT_S, free_port

USER_ENV = "TLS_TEST_REDIS_USERNAME"
PASSWORD_ENV = "TLS_TEST_REDIS_PASSWORD"
USER = "fleet-agent-user"
PASSWORD = "redis-pass-SECRET-0123456789abcdef"
KEY_ENV = "TLS_TEST_KEY"
ADMIN_ENV = "TLS_TEST_ADMIN_TOKEN"
ADMIN = "tls-admin-token-0123456789abcdef"
PREFIX = "tls"
SENTINEL_ENV = "TLS_TEST_SENTINEL_PASSWORD"
SENTINEL_PASSWORD = "sentinel-pass-SECRET-0123456789"
CAP = {"wf-tls": 100.0}
POLL_S = 20.0
_ADMIN = {"authorization": f"Bearer {ADMIN}"}


# ---------------------------------------------------------------------------- certificates


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[str, str]:
    crt, pem = path.with_suffix(".crt"), path.with_suffix(".key")
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(crt), str(pem)


def _cert(
    subject: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None, *, server: bool = False
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if server:
        names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        san = x509.SubjectAlternativeName(names)
        builder = builder.add_extension(san, critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256()), key


@dataclass
class Pki:
    ca: str
    other_ca: str
    """A CA that signed nothing the server shows."""
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def make_pki(where: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed, and a CA that signed neither."""
    ca = _cert("sidecar test CA", None)
    other = _cert("some other CA", None)
    ca_file, _ = _write(where / "ca", *ca)
    other_file, _ = _write(where / "other-ca", *other)
    server_cert, server_key = _write(where / "server", *_cert("redis", ca, server=True))
    client_cert, client_key = _write(where / "client", *_cert("sidecar", ca))
    return Pki(ca_file, other_file, server_cert, server_key, client_cert, client_key)


# ---------------------------------------------------------------------------- redis-server over TLS


class TlsRedis:
    """One ``redis-server`` on a TLS port only, clients' certificates required, the default user off."""

    def __init__(self, pki: Pki) -> None:
        self.pki = pki
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    def start(self) -> TlsRedis:
        p = self.pki
        args = [
            REDIS_SERVER, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no",
            "--tls-cert-file", p.server_cert, "--tls-key-file", p.server_key, "--tls-ca-cert-file", p.ca,
            "--tls-auth-clients", "yes",
            "--user", "default", "off",
            "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all",
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if self.client().ping():
                    return self
            except redis.RedisError:
                if time.monotonic() > end or self.proc.poll() is not None:
                    raise
                time.sleep(0.02)

    def client(self) -> redis.Redis:
        p = self.pki
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=USER,
            password=PASSWORD,
            ssl=True,
            ssl_ca_certs=p.ca,
            ssl_certfile=p.client_cert,
            ssl_keyfile=p.client_key,
            socket_timeout=2,
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


@pytest.fixture
def tls_redis(pki: Pki) -> Iterator[TlsRedis]:
    server = TlsRedis(pki).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def fakes() -> Iterator[tuple[str, str]]:
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        yield provider.url, backend.url


def _state(server: TlsRedis, **tls: str) -> dict[str, Any]:
    p = server.pki
    files = {"ca_file": p.ca, "cert_file": p.client_cert, "key_file": p.client_key, **tls}
    return {
        "backend": "redis",
        "url": server.url,
        "prefix": PREFIX,
        "timeout_ms": 1000,
        "shutdown_flush_s": 0,  # a replica cut off stops at once (its spend is not the point)
        "username": "${" + USER_ENV + "}",
        "password": "${" + PASSWORD_ENV + "}",
        "tls": {k: v for k, v in files.items() if v},
    }


# ---------------------------------------------------------------------------- a sidecar serve process


class Serve:
    """One ``sidecar serve``: its gRPC port, its HTTP port (the admin state view on loopback), its log."""

    def __init__(self, tmp: Path, fakes: tuple[str, str], state: dict[str, Any], password: str = PASSWORD) -> None:
        self.grpc = f"127.0.0.1:{free_port()}"
        self.http = free_port()
        self.prometheus = free_port()
        self.log = tmp / f"serve-{self.http}.log"
        cfg = base_config(
            *fakes,
            server={"listen": self.grpc, "grace_period_s": 1, "admin": {"tokens": ["${" + ADMIN_ENV + "}"]}},
            http={"listen": f"127.0.0.1:{self.http}"},
            policy={"spend_caps": CAP},
            state=state,
            telemetry={"prometheus_port": self.prometheus, "log_level": "INFO"},
        )
        for p in cfg["providers"].values():
            p["api_key"] = "${" + KEY_ENV + "}"
        path = tmp / f"sidecar-{self.http}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update({"OTEL_TRACES_EXPORTER": "none", KEY_ENV: "sk-test-TLSKEY1234567890"})
        env.update({USER_ENV: USER, PASSWORD_ENV: password, ADMIN_ENV: ADMIN, "SIDECAR_ADMIN_TOKEN": ADMIN})
        self.env = env
        with self.log.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        self.banner = self.proc.stdout.readline() if self.proc.stdout else ""
        assert "listening on" in self.banner, self.logs()

    def logs(self) -> str:
        return self.log.read_text()

    def state(self) -> dict[str, Any]:
        answer = httpx.get(f"http://127.0.0.1:{self.http}/admin/state", headers=_ADMIN, timeout=5)
        answer.raise_for_status()
        doc: dict[str, Any] = answer.json()
        return doc

    def raw_state(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.http}/admin/state", headers=_ADMIN, timeout=5).text

    def status(self) -> str:
        """``sidecar status`` against this replica, as an operator runs it."""
        done = subprocess.run(
            [sys.executable, "-m", "sidecar", "status", "--target", self.grpc],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=self.env,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.prometheus}/metrics", timeout=5).text

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {POLL_S:g} s: {what}")
        time.sleep(0.05)


async def _capped_call(serve: Serve) -> float:
    async with AsyncSidecarClient(serve.grpc) as client:
        reply = await client.call_model("gpt", [user("hello over TLS")], job=job(workflow_id="wf-tls"), timeout=30)
    return float(reply.cost_usd)


def _assert_no_secret(where: str, text: str) -> None:
    assert PASSWORD not in text, f"the password shows in {where}"
    assert USER not in text, f"the ACL user shows in {where}"


# ---------------------------------------------------------------------------- the tests


async def test_mtls_and_an_acl_user_from_the_environment_reach_redis_and_show_nowhere(
    tmp_path: Path, tls_redis: TlsRedis, fakes: tuple[str, str]
) -> None:
    serve = Serve(tmp_path, fakes, _state(tls_redis))
    try:
        _until(lambda: serve.state()["state"]["reachable"], "the replica reaching Redis over mTLS")
        cost = await _capped_call(serve)
        key = keys.key(PREFIX, "spend", "wf-tls")
        _until(lambda: tls_redis.client().get(key) is not None, "the capped call's spend in Redis")
        assert float(tls_redis.client().get(key) or 0) == pytest.approx(cost)
        assert tls_redis.client().zcard(f"{PREFIX}:replicas") == 1  # its heartbeat, over TLS as that user
        view, status, metrics = serve.raw_state(), serve.status(), serve.metrics()
    finally:
        serve.stop()
    log = serve.logs()
    assert "unavailable" not in log, log
    for where, text in (("the log", log), ("the state view", view), ("sidecar status", status), ("metrics", metrics)):
        _assert_no_secret(where, text)
    assert "reachable" in status, status  # the status printed the state section


async def test_a_ca_that_did_not_sign_the_server_is_refused_with_a_clear_warning(
    tmp_path: Path, tls_redis: TlsRedis, fakes: tuple[str, str]
) -> None:
    serve = Serve(tmp_path, fakes, _state(tls_redis, ca_file=tls_redis.pki.other_ca))
    try:
        _until(lambda: "unavailable" in serve.logs(), "the outage's WARNING")
        await _capped_call(serve)  # calls go on, under local state
        doc = serve.state()["state"]
        assert doc["reachable"] is False
        assert "certificate verify failed" in doc["last_error"].lower()
        view = serve.raw_state()
    finally:
        serve.stop()
    line = next(x for x in serve.logs().splitlines() if "unavailable" in x)
    assert f"rediss://127.0.0.1:{tls_redis.port}/0" in line  # where, without the user
    assert "certificate verify failed" in line.lower()
    assert "not signed by state.tls.ca_file" in line
    assert not tls_redis.client().keys(f"{PREFIX}:*")  # nothing reached Redis
    _assert_no_secret("the log", serve.logs())
    _assert_no_secret("the state view", view)


async def test_no_client_certificate_and_a_wrong_password_are_refused_each_named(
    tmp_path: Path, tls_redis: TlsRedis, fakes: tuple[str, str]
) -> None:
    no_cert = Serve(tmp_path, fakes, _state(tls_redis, cert_file="", key_file=""))
    wrong = Serve(tmp_path, fakes, _state(tls_redis), password="not-the-password-0123456789")
    try:
        for serve in (no_cert, wrong):
            _until(lambda s=serve: "unavailable" in s.logs(), "the outage's WARNING")  # type: ignore[misc]
            assert serve.state()["state"]["reachable"] is False
    finally:
        no_cert.stop()
        wrong.stop()
    first = next(x for x in no_cert.logs().splitlines() if "unavailable" in x)
    assert "wants a client certificate" in first, first  # an alert, or a reset: TLS 1.3 checks it after the handshake
    second = next(x for x in wrong.logs().splitlines() if "unavailable" in x)
    assert "state.username and state.password" in second, second
    assert "not-the-password-0123456789" not in wrong.logs()
    _assert_no_secret("the log", no_cert.logs() + wrong.logs())


async def test_neither_secret_is_in_a_span(
    tls_redis: TlsRedis, fakes: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    otel = install_in_memory()
    otel.clear()
    monkeypatch.setenv(USER_ENV, USER)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    monkeypatch.setenv(KEY_ENV, "sk-test-TLSKEY1234567890")
    cfg = base_config(*fakes, policy={"spend_caps": CAP}, state=_state(tls_redis))
    for p in cfg["providers"].values():
        p["api_key"] = "${" + KEY_ENV + "}"  # parse_config refuses a key written in the file
    config = parse_config(yaml.safe_dump(cfg))
    assert PASSWORD in config.secrets  # read from the environment: masked
    assert USER in config.secrets
    async with running(config, listen="127.0.0.1:0", clock=FakeClock(), rng=random.Random(7)) as app:
        state: Any = app.state
        end = time.monotonic() + POLL_S
        while not state.available:
            assert time.monotonic() < end, "Redis over mTLS not reached"
            await asyncio.sleep(0.05)
        async with AsyncSidecarClient(app.address) as client:
            await client.call_model("gpt", [user("hello spans")], job=job(workflow_id="wf-tls"), timeout=30)
        tls_redis.kill()  # an outage: its event goes on the next call's span
        async with AsyncSidecarClient(app.address) as client:
            await client.call_model("gpt", [user("hello again")], job=job(workflow_id="wf-tls"), timeout=30)
    spans = otel.exporter.get_finished_spans()
    assert spans
    for span in spans:
        text = repr(dict(span.attributes or {})) + repr([(e.name, dict(e.attributes or {})) for e in span.events])
        _assert_no_secret(f"the span {span.name}", text)


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (
            {"url": "rediss://h:6380/0", "sentinel": {"nodes": ["h:26379"], "service": "m"}},
            "state.url and state.sentinel",
        ),
        ({}, "needs state.url (e.g. url: ${REDIS_URL}) or state.sentinel"),
        ({"url": "rediss://h:6380/0?ssl_cert_reqs=none"}, "TLS settings go in state.tls"),
        ({"url": "redis://h:6379/0", "tls": {}}, "state.tls needs a rediss:// URL"),
        ({"url": "rediss://u:pw-in-url-0123@h:6380/0", "password": "${PW}"}, "state.password and a password in"),
        ({"url": "rediss://h:6380/0", "username": "agent"}, "state.username needs state.password"),
        ({"url": "rediss://h:6380/0", "tls": {"ca_file": "/nonexistent/ca.pem"}}, "state.tls.ca_file"),
        ({"url": "rediss://h:6380/0", "tls": {"key_file": "KEYFILE"}}, "key_file needs state.tls.cert_file"),
        ({"sentinel": {"nodes": ["h:0"], "service": "m"}}, "state.sentinel.nodes.0"),
        ({"sentinel": {"nodes": [], "service": "m"}}, "state.sentinel.nodes"),
        ({"url": "rediss://h:6380/0", "password": "written-in-the-file"}, "state.password: secrets come only"),
        ({"sentinel": {"nodes": ["h:26379"], "service": "m", "password": "in-file-0123"}}, "state.sentinel.password"),
    ],
)
def test_a_state_the_config_cannot_dial_is_refused_naming_its_field(
    state: dict[str, Any], says: str, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PW", "a-password-from-the-environment")
    tls = state.get("tls")
    if tls and tls.get("key_file") == "KEYFILE":
        tls["key_file"] = pki.client_key
    text = yaml.safe_dump({"state": {"backend": "redis", **state}})
    with pytest.raises(ConfigError) as refused:
        parse_config(text)
    message = str(refused.value)
    assert says in message, message
    for secret in ("pw-in-url-0123", "written-in-the-file", "in-file-0123", "a-password-from-the-environment"):
        assert secret not in message


def _tls_sentinel(where: Path, primary: TlsRedis) -> tuple[subprocess.Popen[bytes], int]:
    """A sentinel on a TLS port only (clients' certificates required) with a password of its own, reaching the
    primary over TLS as the user."""
    p, port = primary.pki, free_port()
    conf = where / "sentinel.conf"
    conf.write_text(
        f"port 0\ntls-port {port}\nbind 127.0.0.1\ndir {where}\n"
        f"tls-cert-file {p.server_cert}\ntls-key-file {p.server_key}\ntls-ca-cert-file {p.ca}\n"
        "tls-replication yes\ntls-auth-clients yes\n"
        f"sentinel monitor tls-primary 127.0.0.1 {primary.port} 1\n"
        f"sentinel auth-user tls-primary {USER}\nsentinel auth-pass tls-primary {PASSWORD}\n"
        f"requirepass {SENTINEL_PASSWORD}\n"  # the sentinel's own password (state.sentinel.password)
    )
    args = [REDIS_SERVER, str(conf), "--sentinel"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port


async def test_sentinel_over_tls_finds_the_tls_primary_and_logs_in_as_the_acl_user(
    tmp_path: Path, tls_redis: TlsRedis, fakes: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``state.sentinel`` with ``state.tls``: TLS (and the client certificate) to the sentinel and to the primary."""
    sentinel, port = _tls_sentinel(tmp_path, tls_redis)
    state = {k: v for k, v in _state(tls_redis).items() if k != "url"}
    state["sentinel"] = {
        "nodes": [f"127.0.0.1:{port}"],
        "service": "tls-primary",
        "password": "${" + SENTINEL_ENV + "}",
    }
    monkeypatch.setenv(SENTINEL_ENV, SENTINEL_PASSWORD)  # the process's environment is this one's
    serve: Serve | None = None
    try:
        serve = Serve(tmp_path, fakes, state)
        _until(lambda: serve is not None and serve.state()["state"]["reachable"], "the primary the sentinel names")
        cost = await _capped_call(serve)
        key = keys.key(PREFIX, "spend", "wf-tls")
        _until(lambda: tls_redis.client().get(key) is not None, "the capped call's spend in Redis")
        assert float(tls_redis.client().get(key) or 0) == pytest.approx(cost)
        view = serve.raw_state()
    finally:
        if serve is not None:
            serve.stop()
        sentinel.kill()
        sentinel.wait(10)
    assert "unavailable" not in serve.logs(), serve.logs()
    for where, text in (("the log", serve.logs()), ("the state view", view)):
        _assert_no_secret(where, text)
        assert SENTINEL_PASSWORD not in text, f"the sentinel's password shows in {where}"
