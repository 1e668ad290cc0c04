"""The one converter between the ``sidecar.v1`` contract and the core's plain types.

Requests come in (``model_request``, ``tool_request``, ``report``) with what the door resolves
once (``call_options``: the deadline on the injected clock, the caller's retry-budget override);
answers go out (``model_response``, ``stream_event``, ``tool_response``, ``report_failure``,
``failure``). Enums
convert by number: ``core.kinds`` gives each value its proto counterpart's number, and
tests/policy/test_taxonomy.py proves each pair equal, name for name and number for number. Nothing else in the server
builds a ``sidecar.v1`` message from a core type, or the other way round.

    requests.py   in: model_request, tool_request, report, and call_options (what the door resolves once)
    replies.py    out: model_response, stream_event, tool_response
    failures.py   out: failure (every field, the detail in its oneof), report_failure, hop
    lists.py      out: tool_list, model_list, route_info (ListTools, ListModels)

The package is the converter's one name: a door calls ``convert.model_request``, ``convert.failure``.
"""

from __future__ import annotations

from sidecar.server.convert.failures import failure, hop, report_failure
from sidecar.server.convert.lists import model_list, route_info, tool_list
from sidecar.server.convert.replies import model_response, stream_event, tool_response
from sidecar.server.convert.requests import call_options, job, message, model_request, report, tool_request

__all__ = [
    "call_options",
    "failure",
    "hop",
    "job",
    "message",
    "model_list",
    "model_request",
    "model_response",
    "report",
    "report_failure",
    "route_info",
    "stream_event",
    "tool_list",
    "tool_request",
    "tool_response",
]
