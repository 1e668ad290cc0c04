"""Azure OpenAI: the OpenAI wire formats behind Azure's URLs and keys (``providers[].azure``).

One module for every OpenAI format (Chat Completions today, the Responses API beside it): a format's
upstream asks ``AzureWire.of(provider)`` and, when it is Azure, takes its path and headers from it::

    azure.path           the request goes to (below base_url, the resource's endpoint
                         https://NAME.openai.azure.com)
    deployments          /openai/deployments/{upstream_model}/{operation}?api-version={api_version
                         or AZURE_API_VERSION}: the deployment is the model's upstream_model
    v1                   /openai/v1/{operation}[?api-version=...] (only when api_version is set);
                         the deployment goes in the body's model, as on OpenAI

    credential           header
    api_key              api-key: KEY
    azure.entra_token    Authorization: Bearer TOKEN (an Entra ID token read from the environment)

``operation`` is the format's: ``chat/completions`` (``CHAT``), ``responses`` (``RESPONSES``).

Everything else is OpenAI's and needs nothing here: the bodies and streams; the rate-limit headers
(``x-ratelimit-remaining-requests`` / ``-tokens``, read by ``openai_chat.vocab.rate_budget``, the resets
Azure leaves out: ``core.rate_budget.UNKNOWN_RESET_S``); ``retry-after-ms`` and ``x-ms-retry-after-ms``
(``core.backoff``, for every format); and the content filter (400 ``content_filter`` /
``innererror.code: ResponsibleAIPolicyViolation`` and a finish ``content_filter``, with
``content_filter_result(s)``'s categories: ``openai_chat.vocab.error_refusal``, ``filtered_categories``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

from sidecar.config import ProviderConfig
from sidecar.config.catalog import AZURE_API_VERSION

__all__ = ["API_KEY_HEADER", "CHAT", "RESPONSES", "AzureWire"]

API_KEY_HEADER = "api-key"
CHAT = "chat/completions"
RESPONSES = "responses"


@dataclass(frozen=True, slots=True)
class AzureWire:
    """One provider's Azure URLs and credential (the module's tables)."""

    deployments: bool
    api_version: str | None
    entra_token: str | None

    @classmethod
    def of(cls, provider: ProviderConfig) -> AzureWire | None:
        """The provider's Azure settings; None when it is not Azure OpenAI."""
        azure = provider.azure
        if azure is None:
            return None
        token = azure.entra_token.get_secret_value() if azure.entra_token is not None else None
        deployments = azure.path == "deployments"
        version = azure.api_version or (AZURE_API_VERSION if deployments else None)
        return cls(deployments, version, token)

    def path(self, deployment: str, operation: str) -> str:
        """Where a request of ``operation`` for ``deployment`` goes, below the base URL."""
        query = f"?{urlencode({'api-version': self.api_version})}" if self.api_version else ""
        if self.deployments:
            return f"/openai/deployments/{quote(deployment, safe='')}/{operation}{query}"
        return f"/openai/v1/{operation}{query}"

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The credential's header: the Entra token as a bearer, else the key in ``api-key``."""
        if self.entra_token:
            return {"authorization": f"Bearer {self.entra_token}"}
        return {API_KEY_HEADER: api_key} if api_key else {}
