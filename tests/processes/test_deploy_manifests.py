"""The deployments' sidecar configs are valid for the sidecar itself, in the environment they get.

    deploy/kubernetes/configmap.yaml   its config.yaml, parsed by parse_config and by a real
                                       ``sidecar check-config`` with the sidecar container's env as
                                       the kubelet makes it (agent.yaml: the Secret's keys from
                                       secret.example.yaml, $(NAME) expanded, the downward API)
    docker-compose.yml                 sidecar-a and sidecar-b: one config, one Redis, one prefix,
                                       their gRPC ports on the host's loopback only

The manifests' Kubernetes side (strict decoding into the API types, probes, NetworkPolicies) is
checked by the Go test in deploy/kubernetes/validate (``make deploy-check``). No cluster and no
Docker here: the files are read.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.config import parse_config
from sidecar.server.security import exposure_refusal

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
COMPOSE = ROOT / "docker-compose.yml"

SIDECAR_CONTAINER = "sidecar"
CONFIG_KEY = "config.yaml"
DOWNWARD_STAND_IN = "agent-7d9f-abcde"
"""What a ``fieldRef`` (the pod's name, its namespace) stands for here."""
KUBELET_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KUBE / name).read_text()) if d]


def _one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in _documents(name) if d["kind"] == kind]
    return found


def _sidecar_container() -> dict[str, Any]:
    pod = _one("agent.yaml", "Deployment")["spec"]["template"]["spec"]
    (container,) = [c for c in pod["initContainers"] if c["name"] == SIDECAR_CONTAINER]
    return container


def _kubelet_env(container: dict[str, Any], secret: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: in order, $(NAME) from those before."""
    env: dict[str, str] = {}
    for var in container.get("env", []):
        source = var.get("valueFrom", {})
        if "secretKeyRef" in source:
            env[var["name"]] = secret[source["secretKeyRef"]["key"]]
        elif "fieldRef" in source:
            env[var["name"]] = DOWNWARD_STAND_IN
        else:  # an undefined $(NAME) stays as it is written, as the kubelet leaves it
            env[var["name"]] = KUBELET_REF.sub(lambda m: env.get(m.group(1), m.group(0)), var["value"])
    return env


def _kube_config_and_env() -> tuple[str, dict[str, str]]:
    text = _one("configmap.yaml", "ConfigMap")["data"][CONFIG_KEY]
    secret = _one("secret.example.yaml", "Secret")["stringData"]
    return text, _kubelet_env(_sidecar_container(), secret)


def _dumped(value: Any) -> Any:
    """A dumped config value: a secret's text, else the value."""
    reveal = getattr(value, "get_secret_value", None)
    return reveal() if callable(reveal) else value


# ---------------------------------------------------------------- deploy/kubernetes


def test_the_configmaps_config_is_valid_in_the_sidecar_containers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text, env = _kube_config_and_env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = parse_config(text, "configmap.yaml")  # every ${NAME} it reads is set, or this raises

    server = config.server
    assert server.listen == "0.0.0.0:50051"  # where the kubelet's gRPC probes dial: the pod's IP
    assert not server.allow_insecure
    assert server.tls is None  # the kubelet's gRPC probes speak no TLS
    assert server.auth is not None
    assert server.auth.values() == [env["AGENT_TOKEN"]]
    assert exposure_refusal(server.listen, server) is None  # `sidecar serve` starts on it
    # The admin door is on, with the operator's own token, on the HTTP port on the pod's loopback
    # (kubectl port-forward reaches it; no other pod does).
    assert server.admin is not None
    assert [t.get_secret_value() for t in server.admin.tokens] == [env["SIDECAR_ADMIN_TOKEN"]]
    assert env["SIDECAR_ADMIN_TOKEN"] != env["AGENT_TOKEN"]
    assert config.http is not None
    assert config.http.listen == "127.0.0.1:8080"
    # One worker, so the one port the prometheus.io/port annotation names is every metric of the pod
    # (worker i serves prometheus_port + i).
    assert server.workers == 1
    annotations = _one("agent.yaml", "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(config.telemetry.prometheus_port)

    state = config.model_dump()["state"]
    assert (state["backend"], state["prefix"], state["timeout_ms"]) == ("redis", "sidecar", 50)
    assert _dumped(state["url"]) == env["REDIS_URL"]
    assert env["REDIS_URL"] == f"redis://:{env['REDIS_PASSWORD']}@sidecar-redis:6379/0"

    secrets = config.secrets
    for name in ("AGENT_TOKEN", "SIDECAR_ADMIN_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert env[name] in secrets, f"{name} would not be masked"
    assert (
        server.grace_period_s
        < _one("agent.yaml", "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    )


def test_sidecar_check_config_accepts_the_configmaps_config(tmp_path: Path) -> None:
    text, env = _kube_config_and_env()
    path = tmp_path / CONFIG_KEY
    path.write_text(text)
    container = _sidecar_container()
    assert container["args"] == ["serve", "--config", f"/etc/sidecar/{CONFIG_KEY}"]
    checked = subprocess.run(
        [sys.executable, "-m", "sidecar", "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    assert checked.returncode == 0, checked.stderr
    assert f"{path}: ok (2 models, 0 tools, 2 providers)" in checked.stdout
    for name in ("AGENT_TOKEN", "SIDECAR_ADMIN_TOKEN", "REDIS_PASSWORD", "OPENAI_API_KEY"):
        assert env[name] not in checked.stdout + checked.stderr


def test_the_configmaps_config_reads_every_secret_from_the_environment() -> None:
    text, _env = _kube_config_and_env()
    raw = yaml.safe_load(text)
    assert raw["server"]["auth"]["tokens"] == ["${AGENT_TOKEN}"]
    assert raw["server"]["admin"]["tokens"] == ["${SIDECAR_ADMIN_TOKEN}"]
    assert raw["state"]["url"] == "${REDIS_URL}"
    assert {p["api_key"] for p in raw["providers"].values()} == {"${OPENAI_API_KEY}", "${ANTHROPIC_API_KEY}"}
    secret = _one("secret.example.yaml", "Secret")["stringData"]
    for name, value in secret.items():
        assert value.startswith("replace-"), f"secret.example.yaml: {name} is not a placeholder"
        assert value not in text


# ---------------------------------------------------------------- docker-compose.yml


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def test_the_two_compose_replicas_share_one_config_one_redis_and_one_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = _compose()
    services = compose["services"]
    a, b = services["sidecar-a"], services["sidecar-b"]
    assert "sidecar" not in services  # the single sidecar became the two replicas
    assert a["configs"] == b["configs"]
    (mount,) = a["configs"]
    assert a["command"] == b["command"] == ["serve", "--config", mount["target"]]
    assert a["environment"]["REDIS_URL"] == b["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    assert a["environment"]["OTEL_RESOURCE_ATTRIBUTES"] != b["environment"]["OTEL_RESOURCE_ATTRIBUTES"]
    for replica in (a, b):
        assert replica["depends_on"]["redis"] == {"condition": "service_healthy"}

    redis = services["redis"]
    assert redis["image"].startswith("redis:")
    assert "ports" not in redis  # on the compose network only
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "no"

    content = compose["configs"][mount["source"]]["content"]
    assert "url: $${REDIS_URL}" in content  # compose leaves ${REDIS_URL} for the sidecar to read
    monkeypatch.setenv("REDIS_URL", a["environment"]["REDIS_URL"])
    state = parse_config(content.replace("$$", "$"), "compose").model_dump()["state"]
    assert (state["backend"], state["prefix"]) == ("redis", "sidecar")
    assert _dumped(state["url"]) == "redis://redis:6379/0"


def test_the_compose_replicas_grpc_ports_are_on_the_hosts_loopback_only() -> None:
    services = _compose()["services"]
    replicas = ("sidecar-a", "sidecar-b")
    published = {name: [str(p) for p in services[name]["ports"] if str(p).endswith(":50051")] for name in replicas}
    assert published == {"sidecar-a": ["127.0.0.1:50051:50051"], "sidecar-b": ["127.0.0.1:50052:50051"]}
    assert services["demo"]["command"][services["demo"]["command"].index("--target") + 1] == "sidecar-a:50051"
