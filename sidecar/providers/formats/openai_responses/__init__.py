"""The OpenAI Responses wire format (``wire_format: openai_responses``): ``shapes``, ``vocab``, ``items``,
``upstream`` (with ``decoder``), ``front`` (with ``writer``), ``fake``; served at the ``openai`` door."""

from __future__ import annotations

from sidecar.config import ProviderConfig
from sidecar.providers.formats.azure import AzureWire
from sidecar.providers.formats.openai_responses.front import ResponsesFront
from sidecar.providers.formats.openai_responses.upstream import ResponsesUpstream
from sidecar.providers.formats.openai_responses.vocab import FORMAT_NAME

__all__ = ["FORMAT", "OpenAIResponses"]


class OpenAIResponses:
    name = FORMAT_NAME
    front = ResponsesFront()
    door: str | None = "openai"
    fakes = (f"{__name__}.fake:RESPONSES",)

    def upstream(self, provider: ProviderConfig) -> ResponsesUpstream:
        return ResponsesUpstream(AzureWire.of(provider))


FORMAT = OpenAIResponses()
