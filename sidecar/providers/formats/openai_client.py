"""What the two OpenAI formats' upstreams share (Chat Completions, Responses): ``OpenAIClient``.

where a request goes        the format's path below the base URL, or Azure's (``formats.azure``)
the key                     authorization: Bearer KEY, or Azure's credential
rate-limit headers          ``openai_chat.vocab.rate_budget`` (Azure sends the same names)
an error answer             a content-policy refusal first (``openai_chat.vocab.error_refusal``:
                            PROVIDER_REFUSAL, never retried, whatever the status), else
                            ``providers.errors.classify_response`` with the status ``status_of`` reads
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Retry
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.errors import Target, classify_response, refused
from sidecar.providers.formats.azure import AzureWire
from sidecar.providers.formats.openai_chat.vocab import error_refusal, rate_budget
from sidecar.providers.formats.protocol import HeaderKeyed

__all__ = ["OpenAIClient"]


class OpenAIClient(HeaderKeyed):
    """The module's table, for a format whose own path is ``own_path`` and Azure's operation ``operation``;
    with ``azure``, Azure OpenAI's URLs and credential."""

    own_path = ""
    operation = ""

    def __init__(self, azure: AzureWire | None = None) -> None:
        self.azure = azure

    def path(self, model: str, *, stream: bool) -> str:
        return self.own_path if self.azure is None else self.azure.path(model, self.operation)

    def headers(self, api_key: str | None) -> dict[str, str]:
        if self.azure is not None:
            return self.azure.headers(api_key)
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        return rate_budget(headers)

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        refusal = error_refusal(body)
        if refusal is not None:
            return refused(status, headers, body, target, secrets, *refusal)
        return classify_response(self.status_of(status, body), headers, body, target, secrets, now)

    def status_of(self, status: int, body: str) -> int:
        """The status an error answer stands for (a format whose errors can come in a 200 reads it)."""
        return status
