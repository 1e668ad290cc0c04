"""What a reload did: the answer of ``sidecar.v1.Admin/Reload`` and ``sidecar admin reload``, in plain Python.

    applied     the new config was swapped in (by every worker)
    error       why the file was refused (the error ``check-config`` gives), or None
    workers     each worker's outcome under ``--workers N``; empty in a single process

The reload itself is given to the admin service as ``Reload``, a callable answering one of these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Reload", "ReloadOutcome", "WorkerOutcome"]


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """One worker's outcome of a reload."""

    index: int
    applied: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ReloadOutcome:
    """What a reload did (see the module docstring)."""

    applied: bool
    error: str | None = None
    workers: tuple[WorkerOutcome, ...] = ()


Reload = Callable[[], Awaitable[ReloadOutcome]]
"""Load the config file again, validate it whole, swap it in when good; what happened."""
