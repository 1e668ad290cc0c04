"""``GET /v1/models`` and ``GET /v1/models/{id}``: the catalog and the routes, as ListModels lists them.

    the caller sends          the answer's shape
    anthropic-version         Anthropic's (the Anthropic SDK always sends it; when that front is on):
                              {"data": [{"type": "model", "id", "display_name", "created_at"}],
                               "has_more": false, "first_id", "last_id"}
    anything else             OpenAI's: {"object": "list", "data": [{"id", "object": "model",
                              "created": 0, "owned_by"}]}

Each entry carries ``sidecar``: wire_format, context_window, max_output_tokens, upstream_retries,
and for a route its deployments. ``owned_by`` is the model's provider (``sidecar`` for a route).
An id that is neither a model nor a route is 404 in the caller's format (MODEL_NOT_FOUND).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sidecar_contract.v1 import sidecar_pb2 as pb
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sidecar.config import Config
from sidecar.core.taxonomy import ModelNotFound
from sidecar.providers.formats.registry import format_named
from sidecar.server import convert
from sidecar.server.http.failures import answer_of, failure_extension, failure_headers

__all__ = ["MODELS_PATH", "models_routes"]

MODELS_PATH = "/v1/models"
ANTHROPIC_HEADER = "anthropic-version"
EPOCH = "1970-01-01T00:00:00Z"
"""``created_at`` of every entry: the catalog keeps no date."""


def _extension(m: pb.ModelInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "wire_format": m.wire_format,
        "context_window": m.context_window,
        "max_output_tokens": m.max_output_tokens,
        "upstream_retries": m.upstream_retries,
    }
    if m.deployments:
        out["deployments"] = [{"id": d.id, "role": d.role, "weight": d.weight} for d in m.deployments]
    return out


def _openai(m: pb.ModelInfo) -> dict[str, Any]:
    return {"id": m.id, "object": "model", "created": 0, "owned_by": m.provider or "sidecar", "sidecar": _extension(m)}


def _anthropic(m: pb.ModelInfo) -> dict[str, Any]:
    return {"type": "model", "id": m.id, "display_name": m.id, "created_at": EPOCH, "sidecar": _extension(m)}


def _json(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, headers=headers, media_type="application/json")


def models_routes(config: Callable[[], Config], *, anthropic_shape: bool) -> list[Route]:
    """The two routes; the Anthropic shape only when ``anthropic_shape`` (that front is on). The list
    is the config's ``config()`` gives (the live one: a reload changes it), built once per config."""
    built: list[tuple[Config, list[pb.ModelInfo], dict[str, pb.ModelInfo]]] = []

    def catalog() -> tuple[list[pb.ModelInfo], dict[str, pb.ModelInfo]]:
        now = config()
        if not built or built[0][0] is not now:
            listed = list(convert.model_list(now).models)
            built[:] = [(now, listed, {m.id: m for m in listed})]
        return built[0][1], built[0][2]

    def is_anthropic(request: Request) -> bool:
        return anthropic_shape and ANTHROPIC_HEADER in request.headers

    async def list_models(request: Request) -> Response:
        listed, _ = catalog()
        if is_anthropic(request):
            data = [_anthropic(m) for m in listed]
            first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
            return _json({"data": data, "has_more": False, "first_id": first, "last_id": last})
        return _json({"object": "list", "data": [_openai(m) for m in listed]})

    async def get_model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        _, by_id = catalog()
        found = by_id.get(model_id)
        if found is not None:
            return _json(_anthropic(found) if is_anthropic(request) else _openai(found))
        failure = ModelNotFound(model_id, list(by_id))
        answer = answer_of(failure)
        front = format_named("anthropic" if is_anthropic(request) else "openai").front
        status, error_type = front.answer(answer.code, answer.status)
        extension = failure_extension(failure)
        body = front.error_body(failure.message, error_type, code=answer.code, param="model", extension=extension)
        return _json(body, status, failure_headers(failure, answer))

    return [
        Route(MODELS_PATH, list_models, methods=["GET"]),
        Route(MODELS_PATH + "/{model_id:path}", get_model, methods=["GET"]),
    ]
