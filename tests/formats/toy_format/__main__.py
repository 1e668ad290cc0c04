"""``python -m toy_format ARGS``: the toy format registered, then ``sidecar ARGS`` in this process.

Registration is a function call, before the configuration is read (``names.register``): a config's
``wire_format: toy`` is accepted, the provider's upstream is the toy's, and ``sidecar fake-provider`` serves
its fake at ``/toy/complete`` beside the bundled formats.
"""

from __future__ import annotations

from sidecar.cli import main
from sidecar.providers.formats.registry import register

register("toy", "toy_format")
raise SystemExit(main())
