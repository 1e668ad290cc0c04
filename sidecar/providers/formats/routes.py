"""A model's route, for a format whose URL names the model and the streaming (Gemini, Bedrock Converse).

model_route(path, prefix, separator, (whole, streamed))
    "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "/v1beta/models/", ":",
    ("generateContent", "streamGenerateContent")  ->  ("gemini-2.5-flash", True)
    a path of no such route                       ->  None
"""

from __future__ import annotations

from urllib.parse import unquote

__all__ = ["model_route"]


def model_route(path: str, prefix: str, separator: str, methods: tuple[str, str]) -> tuple[str, bool] | None:
    """The model ``path`` names (URL-decoded) and whether its method is the streamed one; None when ``path``
    (its query aside) is not ``prefix`` + model + ``separator`` + one of ``methods``."""
    rest = path.split("?", 1)[0]
    if not rest.startswith(prefix):
        return None
    model, found, method = rest[len(prefix) :].rpartition(separator)
    if not found or not model or method not in methods:
        return None
    return unquote(model), method == methods[1]
