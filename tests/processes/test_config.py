"""The config is validated at start: an error names the key, the value and what is wrong."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.config import MAX_CONFIG_BYTES, ConfigError, load_config, load_default_config, parse_config, served

CONFIGS = Path(__file__).parents[1] / "configs"


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("bad_unknown_key.yaml", ["server.max_mesage_bytes", "unknown key"]),
        ("bad_port.yaml", ["server.listen", "must be host:port", "'127.0.0.1:99999'"]),
        ("bad_provider_ref.yaml", ["models.gpt.provider", "'openia' is not a configured provider", "known: oai"]),
        ("bad_missing_env.yaml", ["providers.oai.api_key", "SIDECAR_TEST_SURELY_UNSET_KEY is not set"]),
        ("bad_window.yaml", ["policy.windows.rate_limit", "max_s (5.0) must not be below min_s (30.0)"]),
        ("bad_tool_schema.yaml", ["tools.search.parameters", "not a valid JSON schema"]),
        ("bad_placeholder.yaml", ["tools.fetch.url", "placeholder {doc_id} is not a parameter", "parameters: id"]),
        ("bad_wire_format.yaml", ["providers.x.wire_format", "'openai', 'anthropic'", "'cohere'"]),
        ("bad_yaml.yaml", ["not valid YAML"]),
        ("bad_literal_secret.yaml", ["providers.oai.api_key", "secrets come only from the environment"]),
        ("bad_not_utf8.yaml", ["line 6, column 30", "in the value of 'description'", "byte 0xe9", "not UTF-8"]),
        ("bad_deep_yaml.yaml", ["policy.spend_caps[0][0]", "nested more than 64 levels deep"]),
        ("bad_deep_schema.yaml", ["tools.deep.parameters.properties.inner", "nested more than 64 levels deep"]),
        ("bad_billion_laughs.yaml", ["more than 100000 values with its aliases expanded"]),
        ("bad_recursive_alias.yaml", ["policy.more", "the alias *p is inside the node it names"]),
        ("bad_tiny_rate.yaml", ["services.docs.rate", "greater than or equal to 1", "1e-300"]),
        ("bad_infinite_period.yaml", ["services.docs.per_s", "finite number", "inf"]),
        ("bad_nan_cooldown.yaml", ["policy.circuit.cooldown_s", "finite number", "nan"]),
    ],
)
def test_bad_config_names_key_value_and_problem(file: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(CONFIGS / file)
    text = str(caught.value)
    assert text.startswith(str(CONFIGS / file))
    for part in expected:
        assert part in text


def test_an_error_never_shows_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_TEST_LEAKY_KEY", "sk-proj-REALSECRET0123456789")
    with pytest.raises(ConfigError) as caught:
        load_config(CONFIGS / "bad_key_name_with_secret.yaml")
    assert "providers.oai.apikey: unknown key" in str(caught.value)
    assert "REALSECRET" not in str(caught.value)


def test_literal_secret_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(CONFIGS / "bad_literal_secret.yaml")
    assert "sk-literal" not in str(caught.value)


def test_missing_file_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(CONFIGS / "nope.yaml")


def test_good_config_and_env_defaults() -> None:
    cfg = load_config(CONFIGS / "good.yaml")
    assert cfg.server.listen == "unix:/tmp/sidecar-test.sock"
    assert cfg.providers["oai"].api_key is not None
    assert cfg.providers["oai"].api_key.get_secret_value() == "sk-none"
    assert "sk-none" not in repr(cfg)


def test_embedded_default_needs_no_keys() -> None:
    cfg = load_default_config()
    assert cfg.embedded == {"provider", "tools"}
    assert all(p.api_key is None for p in cfg.providers.values())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_check_config_cli_exits_nonzero_with_the_message() -> None:
    bad = _cli("check-config", str(CONFIGS / "bad_provider_ref.yaml"))
    assert bad.returncode == 2
    assert "models.gpt.provider" in bad.stderr
    good = _cli("check-config", str(CONFIGS / "good.yaml"))
    assert good.returncode == 0, good.stderr
    assert "ok (1 models, 0 tools, 1 providers)" in good.stdout


SERVES_NOTHING = "the config serves nothing: no model (models:) and no tool (tools:)"


@pytest.mark.parametrize("text", ["", "# the editor saved only the header\n# and a second comment\n"])
def test_an_empty_or_comments_only_file_is_refused_by_check_config_and_at_start(tmp_path: Path, text: str) -> None:
    """It once loaded as a config of nothing: check-config said ok (0 models, 0 tools, 0 providers) and a
    sidecar served it, answering every call NOT_FOUND. Refused now with one text, whoever reads it."""
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    words = f"sidecar: {caught.value}"
    assert words.startswith(f"sidecar: {path}: {SERVES_NOTHING}")
    check = _cli("check-config", str(path))
    assert (check.returncode, check.stdout, check.stderr.strip()) == (2, "", words)
    for workers in ("1", "2"):  # one process, and the supervisor of --workers 2, before either listens
        serve = _cli("serve", "--config", str(path), "--listen", "127.0.0.1:0", "--workers", workers)
        assert (serve.returncode, serve.stdout, serve.stderr.strip()) == (2, "", words)


def test_only_a_file_must_serve_something() -> None:
    """A file holding only ``server:`` serves nothing either; text parsed on its own (a fragment) is still
    valid, and no --config is the embedded default, which serves its models and tools."""
    with pytest.raises(ConfigError, match=re.escape(SERVES_NOTHING)):
        load_config(CONFIGS / "serves_nothing.yaml")
    assert served(parse_config("server: {listen: '127.0.0.1:0'}\n")) == ([], [])
    models, tools = served(load_default_config())
    assert models
    assert tools


def test_serve_refuses_a_bad_config_before_listening() -> None:
    bad = _cli("serve", "--config", str(CONFIGS / "bad_port.yaml"))
    assert bad.returncode == 2
    assert "server.listen" in bad.stderr


@pytest.mark.parametrize(
    ("file", "key"),
    [
        ("bad_not_utf8.yaml", "'description'"),
        ("bad_deep_yaml.yaml", "policy.spend_caps"),
        ("bad_deep_schema.yaml", "tools.deep.parameters"),
        ("bad_billion_laughs.yaml", "aliases expanded"),
        ("bad_tiny_rate.yaml", "services.docs.rate"),
        ("bad_infinite_period.yaml", "services.docs.per_s"),
    ],
)
@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_hostile_files_exit_2_with_the_key_and_no_traceback(command: str, file: str, key: str) -> None:
    args = (
        ["check-config", str(CONFIGS / file)]
        if command == "check-config"
        else ["serve", "--config", str(CONFIGS / file)]
    )
    done = _cli(*args)
    assert done.returncode == 2, done.stderr
    assert key in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_file_past_the_size_cap_is_refused_unparsed(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_CONFIG_BYTES + b"\n")
    with pytest.raises(ConfigError, match="larger than 1048576 bytes"):
        load_config(big)
    with pytest.raises(ConfigError, match="longer than 1048576 characters"):
        parse_config("#" * (MAX_CONFIG_BYTES + 1))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server: {grace_period_s: 2001-13-45}\n", ["cannot read this value", "month must be in 1..12", "line 1"]),
        ("server:\n  max_message_bytes: " + "9" * 5000 + "\n", ["cannot read this value", "line 2, column 22"]),
        ("policy: {spend_caps: *nowhere}\n", ["not valid YAML", "undefined alias"]),
        ("server: {listen: 'a\x00b'}\n", ["not valid YAML", "unacceptable character #x0000"]),
        ("? [a, b]\n: c\n", ["not valid YAML", "found unhashable key"]),
        ("policy: {tool_max_wait_s: 1e400}\n", ["policy.tool_max_wait_s", "finite number"]),
        ("policy: {tool_window: [0, 1e9]}\n", ["policy.tool_window.max_s", "less than or equal to 3600"]),
        ("services: {s: {rate: 0.5}}\n", ["services.s.rate", "greater than or equal to 1"]),
        ("services: {s: {per_s: 0}}\n", ["services.s.per_s", "greater than or equal to 0.001"]),
        ("services: {s: {circuit: {cooldown_s: 60, max_cooldown_s: 30}}}\n", ["must not be below cooldown_s"]),
        ("policy: {circuit: {probe_timeout_s: 1e-300}}\n", ["policy.circuit.probe_timeout_s", "0.001"]),
        ("policy: {spend_caps: {'*': .inf}}\n", ["policy.spend_caps.*", "finite number"]),
        ("server: {connections: {keepalive_time_s: 0}}\n", ["server.connections.keepalive_time_s", "greater than 0"]),
        ("server: {connections: {max_age_s: 1e9}}\n", ["server.connections.max_age_s", "less than or equal to 86400"]),
        ("server: {connections: {max_connections: 0}}\n", ["server.connections.max_connections", "or equal to 1"]),
        (
            "http: {listen: '127.0.0.1:0', connections: {head_timeout_s: -1}}\n",
            ["http.connections.head_timeout_s", "than 0"],
        ),
        (
            "http: {listen: '127.0.0.1:0', connections: {body_timeout_s: .nan}}\n",
            ["http.connections.body_timeout_s", "finite"],
        ),
    ],
)
def test_values_yaml_cannot_read_or_that_break_the_arithmetic_are_refused(text: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "t.yaml")
    for part in expected:
        assert part in str(caught.value)


def test_aliases_within_the_bound_and_a_utf8_bom_are_fine(tmp_path: Path) -> None:
    text = """\ufeffservices: {docs: {rate: 1, per_s: 60, accept_reports: true}}
tools:
  a: {description: A., kind: search, service: docs, url: "http://127.0.0.1:1/a?q={query}",
      parameters: &query {type: object, properties: {query: {type: string}}, required: [query]}}
  b: {description: B., kind: search, service: docs, url: "http://127.0.0.1:1/b?q={query}", parameters: *query}
"""
    path = tmp_path / "bom.yaml"
    path.write_bytes(text.encode("utf-8"))
    cfg = load_config(path)
    assert cfg.tools["a"].parameters == cfg.tools["b"].parameters
    assert cfg.services["docs"].accept_reports is True
    assert cfg.service("other").accept_reports is False


def test_version() -> None:
    assert _cli("version").stdout.startswith("sidecar 0.")


@pytest.mark.parametrize(
    "url",
    ["http://{host}/items/{id}", "https://api.example:{port}/items/{id}", "https://{scheme}x.example/{id}"],
)
def test_a_tool_url_may_not_let_arguments_choose_its_host(url: str) -> None:
    params = {"type": "object", "properties": {"host": {}, "port": {}, "scheme": {}, "id": {}}}
    tool = {"description": "d", "kind": "fetch", "service": "s", "url": url, "parameters": params}
    with pytest.raises(ConfigError, match=r"tools\.t\.url: a placeholder in the scheme, host or port"):
        parse_config(json.dumps({"tools": {"t": tool}}))
