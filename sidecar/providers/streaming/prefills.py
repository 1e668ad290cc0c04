"""Which deployments continue a prefill: declared in the configuration, else tried and learned.

    a deployment's ``prefill``                     continues a broken stream with a prefill?
    true (the model's, else its provider's)        yes, always (a 400 to it ends that call, unlearned)
    false                                          never
    unset, wire format ``anthropic``               yes (Anthropic continues a last assistant message)
    unset, OpenAI's own API (``api.openai.com``,   never: it answers a trailing assistant message afresh,
      or ``azure``)                                  with no 400 to learn from, so its text would not join
    unset, anything else                           tried: a 400 (or 422) to the prefilled request is
                                                   remembered (``PrefillMemory.refused``), and from then on
                                                   the deployment is taken as one with none (a route
                                                   continues on its next deployment that can)

A deployment is its provider's base URL and wire format and the model's ``upstream_model``: what was
learned holds across a reload that renames the model or keeps the provider. The memory is the process's:
each process of a fleet learns a refusal once, at the cost of one refused attempt (one request, no
tokens), which sharing it through the state backend would save only for the first call of each process.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from sidecar.config import ModelConfig, ProviderConfig
from sidecar.config.catalog import accepts_prefill

__all__ = ["OPENAI_HOSTS", "PrefillMemory", "declared_prefill"]

OPENAI_HOSTS = frozenset({"api.openai.com"})
"""Hosts of OpenAI's own API: a trailing assistant message is answered afresh there, never refused."""
_log = logging.getLogger("sidecar.models")


def declared_prefill(model: ModelConfig, provider: ProviderConfig) -> bool | None:
    """What the configuration and the wire format say (the table above), or None: try it and learn."""
    declared = accepts_prefill(model, provider)
    if declared is not None:
        return declared
    if provider.azure is not None or urlsplit(provider.base_url).hostname in OPENAI_HOSTS:
        return False
    return None


def _key(model: ModelConfig, provider: ProviderConfig) -> tuple[str, str, str]:
    return provider.base_url, provider.wire_format, model.upstream_model


class PrefillMemory:
    """The deployments this process found to refuse a prefill (``RouteCaller.prefills``, every call's; kept
    across reloads: ``carry``)."""

    __slots__ = ("_refused",)

    def __init__(self) -> None:
        self._refused: set[tuple[str, str, str]] = set()

    def carry(self, before: PrefillMemory) -> None:
        """What the memory before a reload learned, kept."""
        self._refused |= before._refused

    def accepts(self, model: ModelConfig, provider: ProviderConfig) -> bool:
        """Whether to send this deployment a prefill: declared, else not yet refused."""
        declared = declared_prefill(model, provider)
        return declared if declared is not None else _key(model, provider) not in self._refused

    def learns(self, model: ModelConfig, provider: ProviderConfig) -> bool:
        """Whether a refusal of this deployment is remembered (its prefill is tried, not declared)."""
        return declared_prefill(model, provider) is None

    def refused(self, model_id: str, model: ModelConfig, provider: ProviderConfig) -> None:
        """The deployment answered a prefilled request with a 400: from now on, taken as one with none."""
        key = _key(model, provider)
        if key not in self._refused:
            self._refused.add(key)
            _log.warning(
                "model %s refused a prefill: its streams are no longer continued on it (set prefill to say so)",
                model_id,
                extra={"model": model_id},
            )
