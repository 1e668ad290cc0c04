"""Out: the catalogs as ``sidecar.v1`` lists: ListTools' tools, ListModels' models and routes."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.config import Config
from sidecar.providers.formats.anthropic_messages.vocab import render_tool as anthropic_tool
from sidecar.providers.formats.openai_chat.vocab import render_tool as openai_tool
from sidecar.tools.catalog import ToolEntry

__all__ = ["model_list", "route_info", "tool_list"]


def tool_list(catalog: Iterable[ToolEntry]) -> pb.ListToolsResponse:
    """ListTools' answer: every configured tool (``ToolService.catalog``), also in each wire's shape."""
    return pb.ListToolsResponse(tools=[_tool_info(t) for t in catalog])


_CATALOG_KINDS = {"search": pb.TOOL_KIND_SEARCH, "fetch": pb.TOOL_KIND_FETCH}
"""A tool of an MCP server is neither: TOOL_KIND_UNSPECIFIED."""


def _tool_info(t: ToolEntry) -> pb.ToolInfo:
    params = json.dumps(t.parameters, separators=(",", ":"))
    parameters = dict(t.parameters)
    return pb.ToolInfo(
        definition=pb.ToolDefinition(name=t.name, description=t.description, parameters_json=params),
        kind=_CATALOG_KINDS.get(t.kind, pb.TOOL_KIND_UNSPECIFIED),
        service=t.service,
        idempotent=t.idempotent,
        openai_json=json.dumps(openai_tool(t.name, t.description, parameters)),
        anthropic_json=json.dumps(anthropic_tool(t.name, t.description, parameters)),
    )


def model_list(config: Config) -> pb.ListModelsResponse:
    """ListModels' answer: the catalog, each model's retry budget resolved as a call resolves it; then
    the routes (``route_info``)."""
    listed = pb.ListModelsResponse(
        models=[
            pb.ModelInfo(
                id=mid,
                provider=m.provider,
                wire_format=config.providers[m.provider].wire_format,
                upstream_model=m.upstream_model,
                context_window=m.context_window,
                max_output_tokens=m.max_output_tokens,
                input_price_per_mtok=m.input_price_per_mtok,
                output_price_per_mtok=m.output_price_per_mtok,
                requests_per_minute=m.requests_per_minute,
                tokens_per_minute=m.tokens_per_minute,
                upstream_retries=config.model_retries(mid),
            )
            for mid, m in config.models.items()
        ]
    )
    listed.models.extend(route_info(config, rid) for rid in config.routes)
    return listed


def route_info(config: Config, route_id: str) -> pb.ModelInfo:
    """A route as ListModels shows it: its deployments (balance, fallback, context; balance weighted),
    the wire format they share (else none), the longest conversation it is sure to take (the context
    fallback's window, or the smallest of the others'), and the most output a call may ask for (the
    smallest maximum). No provider, upstream model or prices: those are each deployment's own."""
    route = config.routes[route_id].route
    models = config.models
    deployments = [pb.RouteDeployment(id=d, role="balance", weight=w) for d, w in route.balance.items()]
    deployments += [pb.RouteDeployment(id=d, role="fallback") for d in route.fallbacks]
    if route.context_fallback is not None:
        deployments.append(pb.RouteDeployment(id=route.context_fallback, role="context"))
    ordinary = [models[d] for d in [*route.balance, *route.fallbacks]]
    window = min(m.context_window for m in ordinary)
    if route.context_fallback is not None:
        window = max(window, models[route.context_fallback].context_window)
    everyone = [models[d.id] for d in deployments]
    formats = {config.providers[m.provider].wire_format for m in everyone}
    return pb.ModelInfo(
        id=route_id,
        wire_format=formats.pop() if len(formats) == 1 else "",
        context_window=window,
        max_output_tokens=min(m.max_output_tokens for m in everyone),
        upstream_retries=config.model_retries(route_id),
        deployments=deployments,
    )
