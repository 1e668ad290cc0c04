"""The Amazon Bedrock Converse wire format (``wire_format: bedrock_converse``): ``shapes``, ``vocab``, ``upstream``
(with ``reply``), ``front``, ``fake``; no door."""

from __future__ import annotations

from sidecar.config import ProviderConfig
from sidecar.providers.formats.bedrock_converse.front import BedrockFront
from sidecar.providers.formats.bedrock_converse.upstream import BedrockUpstream
from sidecar.providers.formats.bedrock_converse.vocab import FORMAT_NAME

__all__ = ["FORMAT", "BedrockConverse"]


class BedrockConverse:
    name = FORMAT_NAME
    front = BedrockFront()
    door: str | None = None
    fakes = (f"{__name__}.fake:BEDROCK",)

    def upstream(self, provider: ProviderConfig) -> BedrockUpstream:
        return BedrockUpstream(provider)


FORMAT = BedrockConverse()
