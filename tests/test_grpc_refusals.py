"""The gRPC port's own refusals, through a real ``sidecar serve`` process: each a precise status, no traceback.

    StreamModel with no token, a wrong one, an admin's      UNAUTHENTICATED (kind UNAUTHORIZED), as CallModel

and after each, the process log holds no traceback and no coroutine left unawaited (an exception
that escapes to gRPC is answered UNKNOWN and logged with its traceback: a log any local caller
could flood). One process for the module, with ``server.auth`` and ``server.admin`` tokens from
its environment, the project's fakes behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import sidecar_client as sc
import yaml
from sidecar_client import pb

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from tests.test_fuzz import Served, fuzz_config

AGENT = "agent-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"
ENV = {"REFUSALS_AGENT_TOKEN": AGENT, "REFUSALS_ADMIN_TOKEN": ADMIN}
DEADLINE_S = 20.0
WITH = {
    "no token": (),
    "a wrong token": (("authorization", "Bearer wrong-token-0123456789abcdef"),),
    "an agent's token": (("authorization", f"Bearer {AGENT}"),),
    "an operator's token": (("authorization", f"Bearer {ADMIN}"),),
}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("grpc-refusals")
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        cfg = fuzz_config(provider.url, backend.url)
        cfg["server"]["auth"] = {"tokens": ["${REFUSALS_AGENT_TOKEN}"]}
        cfg["server"]["admin"] = {"tokens": ["${REFUSALS_ADMIN_TOKEN}"]}
        cfg["telemetry"] = {"log_level": "WARNING"}
        config_path = tmp / "refusals.yaml"
        config_path.write_text(yaml.safe_dump(cfg))
        served = Served(config_path, tmp / "sidecar.log", env=ENV)
        served.start()
        try:
            yield served
        finally:
            served.stop()
        served.assert_no_traceback(what="the whole run")


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def _stream(served: Served, path: str, data: bytes, metadata: tuple[tuple[str, str], ...]) -> None:
    assert served.channel is not None
    for _ in served.channel.unary_stream(path)(data, timeout=DEADLINE_S, metadata=metadata):
        pass


@pytest.mark.parametrize("who", ["no token", "a wrong token", "an operator's token"])
def test_stream_model_without_an_agents_token_is_unauthenticated(guarded: Served, who: str) -> None:
    since = guarded.log_mark()
    request = pb.CallModelRequest(model="local-gpt", messages=[sc.user("hi")]).SerializeToString()
    err = _refused(lambda: _stream(guarded, "/sidecar.v1.Sidecar/StreamModel", request, WITH[who]))
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err  # type: ignore[attr-defined]
    refusal = sc.from_rpc_error(err)
    assert isinstance(refusal, sc.UnauthorizedError)
    assert "server.auth.tokens" in refusal.message
    for token in (AGENT, ADMIN, "wrong-token"):
        assert token not in str(err)
    guarded.assert_no_traceback(since, f"StreamModel with {who}")


def test_stream_model_with_an_agents_token_streams(guarded: Served) -> None:
    request = pb.CallModelRequest(model="local-gpt", messages=[sc.user("hi")]).SerializeToString()
    _stream(guarded, "/sidecar.v1.Sidecar/StreamModel", request, WITH["an agent's token"])
