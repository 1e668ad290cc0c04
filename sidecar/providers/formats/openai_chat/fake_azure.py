"""Azure OpenAI as the fake provider speaks it: the OpenAI Chat Completions wire behind Azure's URLs.

The body, the reply, the stream and the content filter are OpenAI's (``_openai.py``: the
``content_filter`` preset and a finish ``content_filter`` with ``categories`` are Azure's shapes);
what Azure adds::

    route     POST /openai/deployments/{deployment}/chat/completions?api-version=...   the deployment
              is the model (the body's ``model`` is ignored); POST /openai/v1/chat/completions: the
              body's ``model`` names the deployment
    key       ``api-key: KEY`` or ``Authorization: Bearer TOKEN`` (Entra ID); neither: 401
    no api-version on a deployment URL                          404 Resource not found
    headers   apim-request-id, x-ms-region, x-ratelimit-remaining-requests / -tokens (counts
              only: Azure sends no reset); a 429: retry-after (seconds) and x-ms-retry-after-ms
              (a step's ``retry_after_ms`` adds retry-after-ms, read before it)
    errors    Azure's words: rate_limit (429, code "429"), invalid_key (401, code "401"),
              model_not_found (404, DeploymentNotFound), model_unavailable (400,
              OperationNotSupported: "The chatCompletion operation does not work with the specified
              model ..."); the rest as OpenAI's
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sidecar.fakes._http import Request
from sidecar.fakes._limits import Taken
from sidecar.fakes._wire import ErrorSpec, Exchange
from sidecar.providers.formats.openai_chat.fake import _OpenAI

__all__ = ["AZURE", "RETRY_AFTER_MS", "RETRY_AFTER_S"]

_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/chat/completions/?")
_V1 = re.compile(r"/openai/v1/chat/completions/?")
RETRY_AFTER_S = 2
"""A 429's ``retry-after`` (whole seconds, as Azure rounds it up)."""
RETRY_AFTER_MS = 1250
"""A 429's ``x-ms-retry-after-ms``: the wait to the millisecond."""
_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an "
    "active subscription and use a correct regional API endpoint for your resource."
)


class _Azure(_OpenAI):
    name = "azure"
    reply_prefix = "chatcmpl-azfake"

    def routed(self, path: str, body: Any) -> dict[str, Any] | None:
        match = _DEPLOYMENT.fullmatch(path)
        if match is not None:
            return {**body, "model": match[1]} if isinstance(body, dict) else {}
        if _V1.fullmatch(path):
            return body if isinstance(body, dict) else {}
        return None

    def gate(self, request: Request) -> ErrorSpec | None:
        if not self.api_key(request.headers):
            return ErrorSpec(401, "", _DENIED, "401")
        if _DEPLOYMENT.fullmatch(request.path) and not request.query.get("api-version"):
            return ErrorSpec(404, "", "Resource not found", "404")
        return None

    def api_key(self, headers: dict[str, str]) -> str:
        return headers.get("api-key") or super().api_key(headers)

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        if preset == "rate_limit":
            return ErrorSpec(
                429,
                "",
                "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have "
                "exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after "
                f"{RETRY_AFTER_S} seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to "
                "further increase the default rate limit.",
                "429",
            )
        if preset == "invalid_key":
            return ErrorSpec(401, "", _DENIED, "401")
        if preset == "model_not_found":
            return ErrorSpec(
                404,
                "",
                "The API deployment for this resource does not exist. If you created the deployment within the last "
                "5 minutes, please wait a moment and try again.",
                "DeploymentNotFound",
            )
        if preset == "model_unavailable":
            return ErrorSpec(
                400,
                "",
                f"The chatCompletion operation does not work with the specified model, {ex.model or 'unknown'}. "
                "Please choose different model and try again. You can learn more about which models can be used "
                "with each operation here: https://go.microsoft.com/fwlink/?linkid=2197993.",
                "OperationNotSupported",
            )
        return super().preset_error(preset, ex)

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        out = {
            "apim-request-id": f"00000000-0000-4000-8000-{ex.n:012d}",
            "x-request-id": f"req_azfake{ex.n:08d}",
            "x-ms-region": "East US",
            "x-ratelimit-remaining-requests": "0" if limited else "119",
            "x-ratelimit-remaining-tokens": "0" if limited else "119000",
        }
        if limited:
            out |= {"retry-after": str(RETRY_AFTER_S), "x-ms-retry-after-ms": str(RETRY_AFTER_MS)}
        return out

    def budget_headers(self, taken: Taken, now: datetime) -> dict[str, str]:
        out = {"x-ratelimit-remaining-requests": str(taken.remaining)}
        if not taken.allowed:
            seconds = max(taken.reset_s, 0.0)
            out |= {"retry-after": str(-int(-seconds // 1)), "x-ms-retry-after-ms": str(round(seconds * 1000))}
        return out


AZURE = _Azure()
