"""The Anthropic Messages wire format (``wire_format: anthropic``): ``shapes``, ``vocab``, ``upstream`` (with
``rules``), ``front`` (with ``request``), ``fake`` (with ``fake_answers``, ``fake_checks``, ``fake_signing``);
served at the ``anthropic`` door."""

from __future__ import annotations

from sidecar.config import ProviderConfig
from sidecar.providers.formats.anthropic_messages.front import AnthropicFront
from sidecar.providers.formats.anthropic_messages.upstream import AnthropicUpstream
from sidecar.providers.formats.anthropic_messages.vocab import FORMAT_NAME

__all__ = ["FORMAT", "AnthropicMessages"]


class AnthropicMessages:
    name = FORMAT_NAME
    front = AnthropicFront()
    door: str | None = "anthropic"
    fakes = (f"{__name__}.fake:ANTHROPIC",)

    def upstream(self, provider: ProviderConfig) -> AnthropicUpstream:
        return AnthropicUpstream(provider.anthropic_version)


FORMAT = AnthropicMessages()
