"""What a config serves, and the two refusals that keep a sidecar serving.

    served             the names a call may use: the catalog's models (deployments and routes) and
                       the tools. Nothing else is "serving calls": ClassifyFailure needs no config.
    serves nothing     no model and no tool (an empty file, one of only comments, one holding only
                       ``server:``): refused by ``load_config``, so by ``sidecar check-config``, at
                       start (``serve``, the supervisor of ``--workers N``) and at every reload.
                       A file caught empty or half-written (an editor's save, a ConfigMap update)
                       must never empty a running sidecar. No ``--config`` is not an empty file: it
                       is the embedded default (``load_default_config``).
    removes all        a reload whose config keeps none of the running config's models and tools
                       (every name a call may use today would answer NOT_FOUND): the reload decides
                       whether an operator asked to force it (``server.reload``).

The first refusal is ``load_config``'s: whoever reads a file refuses it with the same words.

Why the running config's names and not the names that answered calls lately: every worker of
``--workers N`` and every replica of a fleet judges the same file against the same running config
and so decides the same; names counted from traffic would differ with which process the kernel
or a load balancer happened to send calls to, and a fleet could split between two configs.
"""

from __future__ import annotations

from sidecar.config.document import Config
from sidecar.config.errors import ConfigError

__all__ = ["MAX_NAMES_SHOWN", "check_serves_something", "removes_everything", "served"]

MAX_NAMES_SHOWN = 10
"""A refusal names at most this many models (and as many tools), then says how many more."""


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


def _names(kind: str, names: list[str]) -> str:
    if not names:
        return f"no {kind}s"
    shown = ", ".join(names[:MAX_NAMES_SHOWN])
    more = f" and {len(names) - MAX_NAMES_SHOWN} more" if len(names) > MAX_NAMES_SHOWN else ""
    return f"{kind}s {shown}{more}"


def removes_everything(running: Config, loaded: Config) -> str | None:
    """What ``loaded`` would remove when it keeps none of the models and tools ``running`` serves; None
    when it keeps at least one (or ``running`` serves nothing: there is nothing to keep)."""
    models, tools = served(running)
    if not models and not tools:
        return None
    new_models, new_tools = served(loaded)
    if set(models) & set(new_models) or set(tools) & set(new_tools):
        return None
    return (
        f"the new config would remove every model and tool this sidecar serves ({_names('model', models)}; "
        f"{_names('tool', tools)}): it keeps none of them, so every call naming one would answer NOT_FOUND "
        f"(it has {_names('model', new_models)}; {_names('tool', new_tools)})"
    )
