"""A toy wire format, registered from this folder alone: what a sixth format implements, and nothing more.

    file           what it holds
    __init__.py    FORMAT: the ``protocol.WireFormat`` (its name, its front, an upstream per provider, its door:
                   none, its fake)
    upstream.py    the sidecar as the toy's client: path, headers, body, the reply read, errors classified
    front.py       the toy as a provider speaks it: a request read, a reply and an error rendered
    fake.py        the fake provider's wire of it (``sidecar.fakes``' infrastructure, the front's renderers)
    __main__.py    the launcher: ``register("toy", "toy_format")``, then the sidecar's own command line

The wire: ``POST /toy/complete {"model", "prompt": [{"role": "user"|"assistant", "text"}], "max_tokens"}`` ->
``{"id", "model", "text", "stop": "stop"|"length", "usage": {"in", "out"}}``; an error is ``{"error": {"kind",
"message"}}``. It streams nothing and carries no feature but text (``carries`` is empty).

Importable as ``toy_format`` with this folder's parent (tests/formats/) on ``PYTHONPATH``: the test sets it for
the processes it starts, and nothing else imports it.
"""

from __future__ import annotations

from sidecar.config import ProviderConfig
from sidecar.providers.formats.protocol import WireFormat
from toy_format.front import ToyFront
from toy_format.upstream import ToyUpstream

__all__ = ["FORMAT", "NAME", "Toy"]

NAME = "toy"


class Toy:
    name = NAME
    front = ToyFront()
    door: str | None = None
    fakes = (f"{__name__}.fake:TOY",)

    def upstream(self, provider: ProviderConfig) -> ToyUpstream:
        return ToyUpstream()


FORMAT: WireFormat = Toy()
"""Typed as the protocol, so that mypy holds the toy to it (``MYPYPATH=tests/formats mypy -p toy_format``)."""
