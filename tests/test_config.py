"""The config is validated at start: an error names the key, the value and what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.config import ConfigError, load_config, load_default_config

CONFIGS = Path(__file__).parent / "configs"


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
        ("bad_wire_format.yaml", ["providers.x.wire_format", "'openai' or 'anthropic'", "'gemini'"]),
        ("bad_yaml.yaml", ["not valid YAML"]),
        ("bad_literal_secret.yaml", ["providers.oai.api_key", "secrets come only from the environment"]),
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


def test_serve_refuses_a_bad_config_before_listening() -> None:
    bad = _cli("serve", "--config", str(CONFIGS / "bad_port.yaml"))
    assert bad.returncode == 2
    assert "server.listen" in bad.stderr


def test_version() -> None:
    assert _cli("version").stdout.startswith("sidecar 0.")
