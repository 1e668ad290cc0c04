"""The server section: in-flight limit, TLS, tokens from the environment only (callers with their limits), and
the pool bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sidecar.config import (
    DEFAULT_MAX_IN_FLIGHT,
    MAX_PROVIDER_CONNECTIONS,
    MIN_TOKEN_CHARS,
    ConfigError,
    parse_config,
)
from sidecar.server.security import exposure_refusal, is_local

PROVIDER = "providers: {p: {wire_format: openai, base_url: 'http://127.0.0.1:1/v1', max_connections: %d}}\n"


def test_defaults_are_loopback_a_bounded_limit_and_no_security() -> None:
    server = parse_config("").server
    assert server.listen == "127.0.0.1:50051"
    assert server.max_in_flight == DEFAULT_MAX_IN_FLIGHT
    assert (server.tls, server.auth, server.allow_insecure, server.reflection) == (None, None, False, True)


@pytest.mark.parametrize("value", [0, -1, 100_000])
def test_max_in_flight_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ConfigError, match=r"server\.max_in_flight"):
        parse_config(f"server: {{max_in_flight: {value}}}\n")


def test_tokens_come_from_the_environment_and_count_as_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_A_TOKEN", "a" * MIN_TOKEN_CHARS)
    monkeypatch.setenv("AGENT_B_TOKEN", "b" * 40)
    cfg = parse_config("server: {auth: {tokens: ['${AGENT_A_TOKEN}', '${AGENT_B_TOKEN}']}}\n")
    assert cfg.server.auth is not None
    assert cfg.server.auth.values() == ["a" * MIN_TOKEN_CHARS, "b" * 40]
    assert {"a" * MIN_TOKEN_CHARS, "b" * 40} <= set(cfg.secrets)
    assert "aaaa" not in repr(cfg.server.auth)


def test_a_token_written_in_the_file_is_refused_without_showing_it() -> None:
    literal = "literal-token-0123456789"
    with pytest.raises(ConfigError) as caught:
        parse_config(f"server: {{auth: {{tokens: ['{literal}']}}}}\n")
    assert "server.auth.tokens[0]" in str(caught.value)
    assert "environment" in str(caught.value)
    assert literal not in str(caught.value)


@pytest.mark.parametrize(
    ("values", "says"),
    [(["short"], "tokens[0]: must be at least"), (["x" * 20, "x" * 20], "tokens[1]: the same token as tokens[0]")],
)
def test_weak_or_repeated_tokens_are_refused_without_showing_them(
    monkeypatch: pytest.MonkeyPatch, values: list[str], says: str
) -> None:
    for i, value in enumerate(values):
        monkeypatch.setenv(f"T{i}", value)
    names = ", ".join(f"'${{T{i}}}'" for i in range(len(values)))
    with pytest.raises(ConfigError) as caught:
        parse_config(f"server: {{auth: {{tokens: [{names}]}}}}\n")
    assert says in str(caught.value)
    assert all(v not in str(caught.value) for v in values)


def test_a_caller_is_a_token_with_a_name_and_limits_and_a_plain_token_still_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_A_TOKEN", "a" * MIN_TOKEN_CHARS)
    monkeypatch.setenv("AGENT_B_TOKEN", "b" * 40)
    cfg = parse_config(
        "server: {auth: {tokens: ['${AGENT_A_TOKEN}', {token: '${AGENT_B_TOKEN}', name: agent-b,\n"
        "  requests_per_second: 5, tokens_per_minute: 20000}]}}\n"
    )
    assert cfg.server.auth is not None
    plain, limited = cfg.server.auth.tokens
    assert (plain.name, plain.requests_per_second, plain.tokens_per_minute) == (None, None, None)
    assert (limited.name, limited.requests_per_second, limited.tokens_per_minute) == ("agent-b", 5.0, 20000)
    assert "b" * 40 in cfg.secrets
    assert "bbbb" not in repr(cfg.server.auth)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{token: '${T0}', requests_per_second: 5}", "server.auth.tokens.0: name: required with requests_per_second"),
        ("{token: '${T0}', name: a, requests_per_second: 0}", "server.auth.tokens.0.requests_per_second: Input should"),
        ("{token: '${T0}', name: a, requests_per_second: .inf}", "server.auth.tokens.0.requests_per_second"),
        ("{token: '${T0}', name: a, tokens_per_minute: 2.5}", "server.auth.tokens.0.tokens_per_minute"),
        ("{token: '${T0}', name: 'Agent A'}", "server.auth.tokens.0.name: String should match pattern"),
        ("{token: '${T0}', name: a, burst: 3}", "server.auth.tokens.0.burst: unknown key"),
        ("{name: a}", "server.auth.tokens.0.token: Field required"),
        ("{token: 'literal-token-0123456789', name: a}", "server.auth.tokens[0].token: secrets come only from"),
    ],
)
def test_a_bad_caller_is_refused_naming_its_parameter(monkeypatch: pytest.MonkeyPatch, entry: str, says: str) -> None:
    monkeypatch.setenv("T0", "agent-token-0123456789")
    with pytest.raises(ConfigError) as caught:
        parse_config(f"server: {{auth: {{tokens: [{entry}]}}}}\n")
    assert says in str(caught.value)
    assert "agent-token-0123456789" not in str(caught.value)
    assert "literal-token-0123456789" not in str(caught.value)


def test_two_callers_may_not_share_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T0", "agent-token-0123456789")
    monkeypatch.setenv("T1", "other-token-0123456789")
    with pytest.raises(ConfigError, match=r"tokens\[1\]\.name: 'a' is already tokens\[0\]'s"):
        parse_config("server: {auth: {tokens: [{token: '${T0}', name: a}, {token: '${T1}', name: a}]}}\n")


def test_an_admin_token_is_neither_repeated_nor_an_agents_and_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    agent, other = "agent-token-0123456789", "operator-token-0123456789"
    monkeypatch.setenv("T0", agent)
    monkeypatch.setenv("T1", other)
    with pytest.raises(ConfigError) as caught:
        parse_config("server: {auth: {tokens: ['${T1}', '${T0}']}, admin: {tokens: ['${T0}']}}\n")
    assert "server: admin.tokens[0]: the same token as auth.tokens[1]" in str(caught.value)
    assert agent not in str(caught.value)
    assert other not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        parse_config("server: {admin: {tokens: ['${T1}', '${T1}']}}\n")
    assert "server.admin: tokens[1]: the same token as tokens[0]" in str(caught.value)
    assert other not in str(caught.value)
    apart = parse_config("server: {auth: {tokens: ['${T0}']}, admin: {tokens: ['${T1}']}}\n").server
    assert apart.admin is not None
    assert [t.get_secret_value() for t in apart.admin.tokens] == [other]


def test_no_tokens_at_all_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"server\.auth\.tokens"):
        parse_config("server: {auth: {tokens: []}}\n")


def test_tls_needs_a_cert_and_a_key() -> None:
    with pytest.raises(ConfigError, match=r"server\.tls\.key"):
        parse_config("server: {tls: {cert: /etc/sidecar/cert.pem}}\n")
    tls = parse_config("server: {tls: {cert: c.pem, key: k.pem, client_ca: ca.pem}}\n").server.tls
    assert tls is not None
    assert (tls.cert, tls.key, tls.client_ca) == ("c.pem", "k.pem", "ca.pem")


def test_a_provider_pool_is_bounded() -> None:
    assert parse_config(PROVIDER % MAX_PROVIDER_CONNECTIONS).providers["p"].max_connections == MAX_PROVIDER_CONNECTIONS
    with pytest.raises(ConfigError) as caught:
        parse_config(PROVIDER % 6000)
    assert "providers.p.max_connections" in str(caught.value)
    assert str(MAX_PROVIDER_CONNECTIONS) in str(caught.value)


@pytest.mark.parametrize(
    ("listen", "local"),
    [
        ("127.0.0.1:50051", True),
        ("127.1.2.3:1", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("unix:/tmp/s.sock", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        ("10.0.0.5:50051", False),
        ("sidecar.internal:50051", False),
    ],
)
def test_what_counts_as_local(listen: str, local: bool) -> None:
    assert is_local(listen) is local


def test_beyond_loopback_needs_tls_or_tokens_or_an_explicit_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T", "t" * 32)
    bare = parse_config("").server
    refusal = exposure_refusal("0.0.0.0:50051", bare)
    assert refusal is not None
    assert all(key in refusal for key in ("server.tls", "server.auth", "server.allow_insecure"))
    assert exposure_refusal("127.0.0.1:50051", bare) is None
    for section in ("allow_insecure: true", "auth: {tokens: ['${T}']}", "tls: {cert: c.pem, key: k.pem}"):
        assert exposure_refusal("0.0.0.0:50051", parse_config(f"server: {{{section}}}\n").server) is None


@pytest.mark.parametrize(("replica", "host_port"), [("sidecar-a", 50051), ("sidecar-b", 50052)])
def test_the_compose_file_opts_out_of_transport_security_only_behind_the_hosts_loopback(
    replica: str, host_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())
    sidecar = compose["services"][replica]
    (mount,) = sidecar["configs"]
    monkeypatch.setenv("REDIS_URL", sidecar["environment"]["REDIS_URL"])  # state.url reads it
    server = parse_config(compose["configs"][mount["source"]]["content"].replace("$$", "$"), "compose").server
    assert server.allow_insecure is True
    assert exposure_refusal(server.listen, server) is None
    published = [p for p in sidecar["ports"] if str(p).endswith(":50051")]
    assert published == [f"127.0.0.1:{host_port}:50051"]
    assert exposure_refusal(server.listen, server.model_copy(update={"allow_insecure": False})) is not None
