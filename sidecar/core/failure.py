"""What every failure of the taxonomy is: ``SidecarFailure`` and the tree's two branches.

``SidecarFailure`` carries the message, the HTTP answer, the wait asked, the attempts and the
detail record; ``CorrectableFailure`` and ``UncorrectableFailure`` are the branches the contract
names. A class whose ``kind`` the contract puts under the other branch fails at import. The tree is
drawn in ``core.taxonomy``'s docstring, and every caller imports the classes from there.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from sidecar.core.correctability import CORRECTABLE_LINE, UNCORRECTABLE_LINE
from sidecar.core.details import Detail, Hop, HttpInfo
from sidecar.core.kinds import CORRECTABLE_KINDS, FailureKind

__all__ = ["CorrectableFailure", "SidecarFailure", "UncorrectableFailure"]


class SidecarFailure(Exception):
    """A failure of the taxonomy. Subclasses fix ``kind`` and ``correctable`` (the branch the contract names)."""

    kind: ClassVar[FailureKind] = FailureKind.UNSPECIFIED
    correctable: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__ and cls.correctable is not (cls.kind in CORRECTABLE_KINDS):
            said = "correctable" if cls.kind in CORRECTABLE_KINDS else "not correctable"
            raise TypeError(f"{cls.__name__}: the contract says {cls.kind.name} is {said}")

    def __init__(
        self,
        message: str,
        *,
        http: HttpInfo | None = None,
        retry_after: float | None = None,
        attempts: int = 0,
        detail: Detail | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.http = http
        self.retry_after = retry_after
        self.attempts = attempts
        self.detail = detail
        self.hops: tuple[Hop, ...] = ()

    @property
    def kind_name(self) -> str:
        return self.kind.name

    def explain_to_llm(self) -> str:
        """The message and the retry line: exactly what the model reads."""
        return f"{self.message}\n{CORRECTABLE_LINE if self.correctable else UNCORRECTABLE_LINE}"

    def with_attempts(self, attempts: int) -> SidecarFailure:
        self.attempts = attempts
        return self

    @classmethod
    def worded(
        cls,
        message: str,
        *,
        detail: Detail | None = None,
        http: HttpInfo | None = None,
        retry_after: float | None = None,
    ) -> Self:
        """A failure of this kind in words of its own, not the kind's template (the sidecar's refusals)."""
        failure = cls.__new__(cls)
        SidecarFailure.__init__(failure, message, http=http, retry_after=retry_after, detail=detail)
        return failure

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, attempts={self.attempts})"


class CorrectableFailure(SidecarFailure):
    """The call was wrong; a corrected call may succeed."""

    correctable = True


class UncorrectableFailure(SidecarFailure):
    """The tool or model cannot do this now, whatever the input."""

    correctable = False
