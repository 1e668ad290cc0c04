"""A request's body as the doors read it: whole, up to a limit, never a byte past it.

    bounded_body(request, limit)   the body's bytes; TooLarge when its declared ``content-length``
                                   is past ``limit`` (refused before a byte is read) or, sent in
                                   chunks, as soon as what came is past it (the rest never read)

The model fronts bound theirs at ``server.max_message_bytes`` (``fronts.py``), the admin door at
``admin_front.MAX_BODY_BYTES``; each answers ``TooLarge`` 413 in its own shape.
"""

from __future__ import annotations

from starlette.requests import Request

__all__ = ["TooLarge", "bounded_body"]

_MAX_LENGTH_DIGITS = 19
"""A ``content-length`` of more digits is past any limit (and ``int`` reads it in linear time only)."""


class TooLarge(Exception):
    """A body past the reader's limit."""


async def bounded_body(request: Request, limit: int) -> bytes:
    """The body of ``request``, at most ``limit`` bytes; ``TooLarge`` past it (see the module docstring)."""
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and (len(declared) > _MAX_LENGTH_DIGITS or int(declared) > limit)
    ):
        raise TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
    return b"".join(chunks)
