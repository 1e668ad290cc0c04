"""The correctable branch of the taxonomy: the call was wrong; a corrected call may succeed.

InvalidInput (and NotCarried, the same from a deployment's format), ResourceNotFound, Guardrail,
JsonParse and ResponseValidation, each worded as the way to get it right, what the caller sent
echoed within bounds. Callers import them from ``core.taxonomy``, which draws the tree.
"""

from __future__ import annotations

from sidecar.core.details import FieldProblem, HttpInfo, InvalidInputDetail, ReplyDetail, ResourceDetail
from sidecar.core.failure import CorrectableFailure
from sidecar.core.kinds import FailureKind
from sidecar.core.text import cap, echo

__all__ = [
    "MAX_PROBLEMS",
    "RULE_CHARS",
    "Guardrail",
    "InvalidInput",
    "JsonParse",
    "NotCarried",
    "ResourceNotFound",
    "ResponseValidation",
]


def _show(value: str) -> str:
    return '""' if value == "" else cap(value, 80)


RULE_CHARS = 500
"""A rule or reason is kept up to this many characters (it may quote a caller's schema)."""
MAX_PROBLEMS = 20
"""A reply's problems listed one per line, at most this many (then how many more there were)."""


class InvalidInput(CorrectableFailure):
    """The input broke a rule; the rule is written as the way to get it right."""

    kind = FailureKind.INVALID_INPUT

    def __init__(
        self, parameter: str, value: str, rule: str, *, http: HttpInfo | None = None, as_sent: bool = False
    ) -> None:
        parameter, value, rule = echo(parameter), echo(value), echo(rule, RULE_CHARS)
        super().__init__(
            f"Invalid value for parameter '{parameter}' (got {_show(value)}): {rule}",
            http=http,
            detail=InvalidInputDetail(parameter=parameter, value=value, rule=rule),
        )
        self.as_sent = as_sent
        """``parameter`` is already the path in the caller's own request (a key the sidecar carried as it was
        sent, never interpreted): a door names it as it is, with no translation from the contract's names."""


class NotCarried(InvalidInput):
    """INVALID_INPUT from a deployment's wire format, before sending: the request is well-formed, and
    this format cannot carry a part of it or breaks a rule of its own (another deployment may carry it)."""

    @classmethod
    def of(cls, refused: InvalidInput) -> NotCarried:
        detail = refused.detail
        assert isinstance(detail, InvalidInputDetail)
        return cls(detail.parameter, detail.value, detail.rule, http=refused.http, as_sent=refused.as_sent)


class ResourceNotFound(CorrectableFailure):
    """A well-formed identifier that names nothing."""

    kind = FailureKind.RESOURCE_NOT_FOUND

    def __init__(self, resource_type: str, identifier: str, *, http: HttpInfo | None = None, where: str = "") -> None:
        identifier = echo(identifier)
        at = f" at {echo(where)}" if where else ""
        super().__init__(
            f"No {resource_type} '{identifier}' exists{at}. Try another identifier or another tool.",
            http=http,
            detail=ResourceDetail(resource_type=resource_type, identifier=identifier),
        )


class Guardrail(CorrectableFailure):
    """A guardrail refused the call."""

    kind = FailureKind.GUARDRAIL

    def __init__(self, guardrail: str, reason: str, value: str = "") -> None:
        reason, value = echo(reason, RULE_CHARS), echo(value)
        super().__init__(
            f"The {guardrail} guardrail refused the call: {reason}",
            detail=InvalidInputDetail(parameter=guardrail, value=value, rule=reason),
        )


class JsonParse(CorrectableFailure):
    """The reply was not the JSON object asked for."""

    kind = FailureKind.JSON_PARSE

    def __init__(self, reason: str, expected_shape: str, *, model: str = "") -> None:
        reason, expected_shape = echo(reason, RULE_CHARS), echo(expected_shape, RULE_CHARS)
        super().__init__(
            f"Your reply was not the JSON object asked for: {reason}. "
            f"Reply with only a JSON object, no prose or code fences, of this shape: {expected_shape}",
            detail=ReplyDetail(parser_reason=reason, expected_shape=expected_shape, model=model),
        )


class ResponseValidation(CorrectableFailure):
    """The reply parsed but left required fields empty: every failed field, one per line."""

    kind = FailureKind.RESPONSE_VALIDATION

    def __init__(self, problems: list[tuple[str, str]], *, model: str = "") -> None:
        more = len(problems) - MAX_PROBLEMS
        problems = [(echo(f), echo(p)) for f, p in problems[:MAX_PROBLEMS]]
        if more > 0:
            problems.append(("(more)", f"{more} more problems not listed"))
        lines = "\n".join(f"- {field}: {problem}" for field, problem in problems)
        super().__init__(
            f"Your reply left required fields empty or invalid; reply again with every field filled:\n{lines}",
            detail=ReplyDetail(fields=tuple(FieldProblem(field=f, problem=p) for f, p in problems), model=model),
        )
