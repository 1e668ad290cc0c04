"""What a config serves, and the two refusals that keep a sidecar serving.

    served             the names a call may use: the catalog's models (deployments and routes) and
                       the tools. Nothing else is "serving calls": ClassifyFailure needs no config.
    serves nothing     no model and no tool (an empty file, one of only comments, one holding only
                       ``server:``): refused by ``load_config``, so by ``sidecar check-config``, at
                       start (``serve``, the supervisor of ``--workers N``) and at every reload.
                       A file caught empty or half-written (an editor's save, a ConfigMap update)
                       must never empty a running sidecar. No ``--config`` is not an empty file: it
                       is the embedded default (``load_default_config``).

The refusal is ``load_config``'s: whoever reads a file refuses it with the same words.
"""

from __future__ import annotations

from sidecar.config.document import Config
from sidecar.config.errors import ConfigError

__all__ = ["check_serves_something", "served"]


def served(config: Config) -> tuple[list[str], list[str]]:
    """The names a call may use: the catalog's models (deployments and routes), the tools; each sorted."""
    return config.catalog, sorted(config.tools)


def check_serves_something(config: Config, source: str) -> Config:
    """``config``, or ConfigError when it declares no model and no tool."""
    models, tools = served(config)
    if models or tools:
        return config
    raise ConfigError(
        f"{source}: the config serves nothing: no model (models:) and no tool (tools:); an empty file or one "
        "of only comments is refused, at start and at every reload, so that a file caught half-written "
        "never empties a sidecar (with no --config, sidecar serve runs the embedded default)"
    )
