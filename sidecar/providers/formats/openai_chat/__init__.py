"""The OpenAI Chat Completions wire format (``wire_format: openai``): ``shapes``, ``vocab``, ``upstream`` (with
``stream``), ``front`` (with ``request``), ``fake`` (the OpenAI wire) and ``fake_azure`` (the same behind Azure
OpenAI's URLs); served at the ``openai`` door."""

from __future__ import annotations

from sidecar.config import ProviderConfig
from sidecar.providers.formats.azure import AzureWire
from sidecar.providers.formats.openai_chat.front import OpenAIFront
from sidecar.providers.formats.openai_chat.upstream import OpenAIUpstream
from sidecar.providers.formats.openai_chat.vocab import FORMAT_NAME

__all__ = ["FORMAT", "OpenAIChat"]


class OpenAIChat:
    name = FORMAT_NAME
    front = OpenAIFront()
    door: str | None = "openai"
    fakes = (f"{__name__}.fake:OPENAI", f"{__name__}.fake_azure:AZURE")

    def upstream(self, provider: ProviderConfig) -> OpenAIUpstream:
        return OpenAIUpstream(AzureWire.of(provider))


FORMAT = OpenAIChat()
