"""The Gemini wire format (``wire_format: gemini``): ``shapes``, ``vocab``, ``upstream`` (with ``replies``), ``front``
(with ``request``), ``fake``; no door."""

from __future__ import annotations

from sidecar.config import ProviderConfig
from sidecar.providers.formats.gemini.front import GeminiFront
from sidecar.providers.formats.gemini.upstream import GeminiUpstream
from sidecar.providers.formats.gemini.vocab import FORMAT_NAME

__all__ = ["FORMAT", "Gemini"]


class Gemini:
    name = FORMAT_NAME
    front = GeminiFront()
    door: str | None = None
    fakes = (f"{__name__}.fake:GEMINI",)

    def upstream(self, provider: ProviderConfig) -> GeminiUpstream:
        return GeminiUpstream()


FORMAT = Gemini()
