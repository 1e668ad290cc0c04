"""``sidecar status`` and ``sidecar admin`` against a sidecar that listens with TLS and mTLS.

The certificates are the suite's throwaway CA (``tests/processes/test_transport_security.py``'s ``pki``):
the server's for 127.0.0.1, a client certificate that CA signed, a stranger's. Both doors are
reached: the gRPC port (``--tls``, ``--ca``, ``--cert``/``--key``) and the HTTP port (``https://``).
"""

from __future__ import annotations

import asyncio
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from sidecar.cli import main
from sidecar.status import TOKEN_ENV
from tests.conftest import Running, Start
from tests.fronts.test_admin import ADMIN, AGENT, HTTP, _seed
from tests.processes.test_transport_security import Pki, pki  # noqa: F401  (the fixture)

pytestmark = pytest.mark.asyncio


async def _tls_sidecar(start_sidecar: Start, pki: Pki, *, mtls: bool) -> Running:  # noqa: F811
    tls = {"cert": str(pki.cert), "key": str(pki.key), **({"client_ca": str(pki.ca)} if mtls else {})}
    r = await start_sidecar(
        http=HTTP,
        server={"tls": tls, "auth": {"tokens": [AGENT]}, "admin": {"tokens": [ADMIN]}},
        policy={"spend_caps": {"wf-1": 2.5}},
    )
    _seed(r)
    return r


async def _cli(*argv: str) -> tuple[int, str]:
    """``sidecar ARGV`` as an operator types it; its exit code and what it printed."""

    def run() -> tuple[int, str]:
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(list(argv))
        return code, out.getvalue()

    return await asyncio.to_thread(run)


def _https(r: Running) -> str:
    assert r.app.http is not None
    assert r.app.http.scheme == "https"
    return f"https://127.0.0.1:{r.app.http.port}"


async def test_status_and_actions_over_tls_on_both_doors(
    start_sidecar: Start,
    pki: Pki,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    r = await _tls_sidecar(start_sidecar, pki, mtls=False)
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    grpc_target, https = r.app.address, _https(r)

    code, out = await _cli("status", "--target", grpc_target, "--ca", str(pki.ca))
    assert code == 0, out
    assert "flaky" in out
    assert "wf-1" in out
    code, out = await _cli("status", "--target", https, "--ca", str(pki.ca))
    assert (code, "flaky" in out) == (0, True), out
    code, out = await _cli("admin", "lift-pause", "gpt", "--target", grpc_target, "--tls", "--ca", str(pki.ca))
    assert (code, out.splitlines()[0]) == (0, "lift-pause gpt: changed=True, reach=local")
    code, out = await _cli("admin", "reset-spend", "wf-1", "--target", https, "--ca", str(pki.ca))
    assert (code, out.splitlines()[0]) == (0, "reset-spend wf-1: was_usd=1.25, reach=local")
    code, out = await _cli("admin", "reload", "--target", grpc_target, "--ca", str(pki.ca))
    assert code == 1  # it reached the Admin service: this in-process sidecar has no file to reload
    assert "no config file to reload" in out

    # plaintext to a TLS port, or a CA that did not sign the server's certificate: refused, said
    code, out = await _cli("status", "--target", grpc_target)
    assert code == 1
    assert "sidecar status:" in out
    code, out = await _cli("status", "--target", https)  # the system's roots do not trust the test CA
    assert code == 1
    assert "CERTIFICATE_VERIFY_FAILED" in out
    code, out = await _cli("status", "--target", https.replace("https", "http"), "--ca", str(pki.ca))
    assert code == 2
    assert "give an https:// URL" in out


async def test_mtls_needs_the_client_certificate(
    start_sidecar: Start,
    pki: Pki,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    r = await _tls_sidecar(start_sidecar, pki, mtls=True)
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    mine = ("--ca", str(pki.ca), "--cert", str(pki.client_cert), "--key", str(pki.client_key))
    for target in (r.app.address, _https(r)):
        code, out = await _cli("status", "--target", target, *mine)
        assert code == 0, out
        assert "flaky" in out
        code, out = await _cli("admin", "close-circuit", "flaky", "--target", target, *mine)
        assert code == 0, out
        assert "close-circuit flaky:" in out
        code, out = await _cli("status", "--target", target, "--ca", str(pki.ca))  # no client certificate
        assert code == 1, out
        stranger = ("--cert", str(pki.other_client_cert), "--key", str(pki.other_client_key))
        code, out = await _cli("status", "--target", target, "--ca", str(pki.ca), *stranger)
        assert code == 1, out
    code, out = await _cli("status", "--target", r.app.address, "--ca", str(pki.ca), "--cert", str(pki.client_cert))
    assert code == 2
    assert "--cert and --key go together" in out
    code, out = await _cli("status", "--target", r.app.address, "--ca", str(tmp_path / "nope.pem"))
    assert code == 2
    assert "nope.pem: cannot read" in out
