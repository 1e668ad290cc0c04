"""The wheels of sidecar-contract and sidecar-client as a user installs them, checked from the inside.

``make python-packages`` builds both distributions (sdist, then the wheel from the sdist), installs
the two wheels into a clean venv with their dependencies and nothing else of this repository, and
runs this file there (``python -I``: not this folder, not the repository) under
``tests/conformance/harness.py exec``, which starts the fakes and a real sidecar and sets
SIDECAR_ADDR. It proves:

- both packages import from that venv, the client at the contract's version and pinned to it
  (``sidecar-contract==<version>``, what a package index takes);
- the error mapping works from the installed stubs alone (a google.rpc.Status of kind
  QUOTA_EXHAUSTED is a QuotaExhaustedError, the retry line read from the contract's options);
- calls against the real sidecar: ListModels answers, an unknown model fails CallModel as a
  ModelNotFoundError, ExecuteTool of no tool is a correctable INVALID_INPUT outcome.

Not a pytest module: it runs where pytest is not installed.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Callable
from pathlib import Path

CORRECTABLE_LINE = (
    "[This error may be correctable - you can retry with different parameters or try a different approach]"
)
UNCORRECTABLE_LINE = "[This error is not correctable - consider an alternative approach]"


def main() -> int:
    import grpc
    import sidecar_client
    import sidecar_contract
    from google.rpc import error_details_pb2, status_pb2
    from sidecar_client import errors, pb

    venv = Path(sys.prefix).resolve()
    for module in (sidecar_client, sidecar_contract):
        where = Path(str(module.__file__)).resolve()
        assert venv in where.parents, f"{module.__name__} imported from {where}, not from the venv {venv}"

    version = importlib.metadata.version("sidecar-contract")
    assert importlib.metadata.version("sidecar-client") == version
    requires = importlib.metadata.requires("sidecar-client") or []
    assert f"sidecar-contract=={version}" in requires, requires

    assert sidecar_client.CORRECTABLE_LINE == CORRECTABLE_LINE
    assert sidecar_client.UNCORRECTABLE_LINE == UNCORRECTABLE_LINE
    info = error_details_pb2.ErrorInfo(reason="QUOTA_EXHAUSTED", domain="sidecar")
    status = status_pb2.Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], message="out of credit")
    status.details.add().Pack(info)
    mapped = errors.from_status(status, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert isinstance(mapped, sidecar_client.QuotaExhaustedError), type(mapped)
    assert isinstance(mapped, sidecar_client.UncorrectableError)
    assert mapped.explanation == f"out of credit\n{UNCORRECTABLE_LINE}", mapped.explanation

    with sidecar_client.SidecarClient(os.environ["SIDECAR_ADDR"]) as sidecar:
        models = [model.id for model in sidecar.list_models()]
        assert models, "the sidecar lists no model"
        err = _raised(lambda: sidecar.call_model("no-such-model", [sidecar_client.user("hi")], timeout=30))
        assert isinstance(err, sidecar_client.ModelNotFoundError), repr(err)
        assert not err.correctable
        assert err.explanation.endswith(f"\n{UNCORRECTABLE_LINE}"), err.explanation
        outcome = sidecar.execute_tool("", {}, call_id="call_1", timeout=30)
        assert outcome.WhichOneof("outcome") == "failure", outcome
        assert outcome.failure.kind == pb.FAILURE_KIND_INVALID_INPUT
        assert outcome.failure.correctable
        assert outcome.model_text.endswith(f"\n{CORRECTABLE_LINE}"), outcome.model_text

    print(f"sidecar-contract and sidecar-client {version}: installed from their wheels, {len(models)} models listed")
    return 0


def _raised(call: Callable[[], object]) -> Exception | None:
    """What ``call`` raised; None when it returned."""
    try:
        call()
    except Exception as exc:
        return exc
    return None


if __name__ == "__main__":
    sys.exit(main())
