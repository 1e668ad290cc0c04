"""An INVALID_INPUT the core raised, in the names of the door's caller.

The core checks a request in the gRPC contract's names (``max_output_tokens``,
``tools[0].parameters_json``, ``messages[3].parts[0]``); a caller of an HTTP door sent its format's
(``max_tokens``, ``tools[0].input_schema``, its own message 4). ``callers_failure`` is the one
translation, at the door, of a failure the core raised (the front's own refusals name the caller's
keys already); the parameter is renamed in ``error.param``, in the message, and in the sidecar
extension's Failure detail::

    the core's path             the caller's
    messages[i]...              the caller's message core message i was read from (``messages[k]``,
                                Responses' ``input[k]``), found by reading the body's first messages
                                again with the front's own parser; ``.parts[j]`` below it is that
                                message's ``content[j]`` when its content list is the parts one for one;
                                a message several of the caller's make (tool results, a Responses turn)
                                or anything the front cannot read back: the list's key alone
    any other                   the front's ``params`` (``ParamNames``), the longest prefix it names
                                (its ``[]`` filled with the indices in order); a key the front names as
                                alternatives, the one the caller sent (``max_tokens`` or
                                ``max_completion_tokens``)
    job.upstream_retries        the header that sets it, on every door; on_overflow's too
                                (x-sidecar-on-overflow, x-sidecar-compaction)
    unnamed                     its first segment, the same key at the door (``temperature``)
    as sent                     as it is: a carried key's path (``InvalidInput.as_sent``) is the
                                caller's own (``tools[0].eager_input_streaming``)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sidecar.core.conversation import Message
from sidecar.core.details import InvalidInputDetail
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.formats.protocol import Front, ParamNames

__all__ = ["caller_path", "callers_failure"]

_INDEX = re.compile(r"\[(\d+)\]")
_MESSAGE = re.compile(r"messages\[(\d+)\](.*)", re.DOTALL)
_PART = re.compile(r"\.parts\[(\d+)\]")
_HEAD = re.compile(r"[^.\[]+")
_EVERY_DOOR: ParamNames = {
    "job.upstream_retries": "header x-sidecar-upstream-retries",
    "on_overflow.action": "header x-sidecar-on-overflow",
    "on_overflow.strategies": "header x-sidecar-compaction",
}


def callers_failure(front: Front, failure: SidecarFailure, body: Mapping[str, Any]) -> SidecarFailure:
    """``failure`` naming the caller's parameter (the module's table); any other failure as it is."""
    detail = failure.detail
    if not isinstance(detail, InvalidInputDetail) or (isinstance(failure, InvalidInput) and failure.as_sent):
        return failure  # as_sent: the caller's path already
    named = caller_path(front, detail.parameter, body)
    if named == detail.parameter:
        return failure
    renamed = type(failure).worded(
        failure.message.replace(f"'{detail.parameter}'", f"'{named}'", 1),
        detail=replace(detail, parameter=named),
        http=failure.http,
        retry_after=failure.retry_after,
    )
    renamed.attempts, renamed.hops = failure.attempts, failure.hops
    return renamed


def caller_path(front: Front, path: str, body: Mapping[str, Any]) -> str:
    """The caller's name for the core's parameter ``path`` (the module's table)."""
    names = front.params
    listed = _MESSAGE.fullmatch(path)
    if listed is not None:
        return _message_path(front, int(listed.group(1)), listed.group(2), body)
    shape = _INDEX.sub("[]", path)
    indices = iter(_INDEX.findall(path))
    while shape:
        name = names.get(shape) or _EVERY_DOOR.get(shape)
        if name is not None:
            chosen = _sent(name, body)
            return re.sub(r"\[\]", lambda _: f"[{next(indices, '0')}]", chosen)
        cut = max(shape.rfind("."), shape.rfind("["))
        shape = shape[:cut] if cut > 0 else ""
    head = _HEAD.match(path)
    return head.group(0) if head else path


def _sent(name: str | tuple[str, ...], body: Mapping[str, Any]) -> str:
    if isinstance(name, str):
        return name
    return next((key for key in name if body.get(key) is not None), name[0])


def _message_path(front: Front, index: int, rest: str, body: Mapping[str, Any]) -> str:
    key = _sent(front.params.get("messages", "messages"), body)
    items = body.get(key)
    if not isinstance(items, list):
        return key
    found = _source(front, body, key, items, index)
    if found is None:
        return key
    k, message = found
    at = f"{key}[{k}]"
    part = _PART.match(rest)
    content = items[k].get("content") if isinstance(items[k], dict) else None
    if part is not None and isinstance(content, list) and len(content) == len(message.parts):
        return f"{at}.content[{part.group(1)}]"
    return at


def _read(front: Front, body: Mapping[str, Any], key: str, items: list[Any], count: int) -> tuple[Message, ...]:
    """The core's messages of the caller's first ``count`` messages (as the front reads them)."""
    return front.parse({**body, key: items[:count]}).request.messages


def _source(
    front: Front, body: Mapping[str, Any], key: str, items: list[Any], index: int
) -> tuple[int, Message] | None:
    """The caller's message core message ``index`` was read from, and that message; None when it is read
    from several (a following message changes it) or the prefixes cannot be read back."""
    low, high = 0, len(items) - 1
    try:
        if len(_read(front, body, key, items, len(items))) <= index:
            return None
        while low < high:  # the first k whose prefix of k + 1 messages reaches core message ``index``
            mid = (low + high) // 2
            if len(_read(front, body, key, items, mid + 1)) > index:
                high = mid
            else:
                low = mid + 1
        message = _read(front, body, key, items, low + 1)[index]
        if low + 1 < len(items) and _read(front, body, key, items, low + 2)[index] != message:
            return None
    except SidecarFailure:  # a prefix the front refuses (it read the whole body): no exact path
        return None
    return low, message
