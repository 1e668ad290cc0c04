"""ClassifyFailure: what an agent's own tool saw, mapped onto the very failure ExecuteTool would give.

    bounds                            service <= 128, endpoint <= 2,048, parameter / resource_type <= 128
                                      characters, else INVALID_INPUT naming the field; a value is cut at 1,024
    a pre-check (nothing observed)    the circuit would refuse: CIRCUIT_OPEN; half-open and the report may
                                      feed the circuit: this caller (its job id) holds the one probe (with
                                      shared state, claimed fleet-wide first: ``ServiceGuard.claim``)
    a response or a transport fault   core.tool_failures.classify, exactly as ExecuteTool; when the report
                                      may feed the service's circuit, its outcome does:
        success                       a success (a probe report from the probe's holder closes it)
        a service failure             charged, quoting what the service said (only a charge makes a guard
                                      for a service named only in reports)
        anything else on a probe      the service answered: it is up; no answer: the probe is lost

Whether a report may feed a circuit (docs/trust.md): always for a service named only in reports;
for one the sidecar calls itself (``services:``, or a tool's), only with ``accept_reports: true``;
otherwise it is classified and answered the same, and charges nothing.
"""

from __future__ import annotations

from dataclasses import replace

from sidecar.config import Config
from sidecar.core.circuit import Admission, ServiceGuard
from sidecar.core.clock import Clock
from sidecar.core.conversation import Report, ReportAnswer
from sidecar.core.failure_log import log_classified
from sidecar.core.kinds import TransportFault
from sidecar.core.observer import Observer, ReportAccepted
from sidecar.core.service_guards import MAX_SERVICE_NAME_CHARS, ServiceGuards
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.core.text import ELLIPSIS, cap, endpoint_of
from sidecar.core.tool_failures import Observation, classify, is_service_failure, trigger_of

__all__ = ["MAX_REPORT_ENDPOINT_CHARS", "MAX_REPORT_NAME_CHARS", "MAX_REPORT_VALUE_CHARS", "Reports"]

MAX_REPORT_ENDPOINT_CHARS = 2048
"""A ClassifyFailure endpoint (its query string cut) longer than this is INVALID_INPUT."""
MAX_REPORT_NAME_CHARS = 128
"""The longest ``parameter`` and ``resource_type`` of a ClassifyFailure request."""
MAX_REPORT_VALUE_CHARS = 1024
"""A reported ``value`` is quoted up to this many characters."""
MIN_STATUS, MAX_STATUS = 100, 599


class Reports:
    """Classifies reports and, where the trust model allows, feeds them to the service guards."""

    __slots__ = ("_clock", "_config", "_guards", "_observer", "_secrets")

    def __init__(self, config: Config, clock: Clock, guards: ServiceGuards, observer: Observer) -> None:
        self._config = config
        self._clock = clock
        self._guards = guards
        self._observer = observer
        self._secrets = config.secrets

    async def classify(self, report: Report) -> ReportAnswer:
        service = report.service
        endpoint = endpoint_of(report.endpoint, self._secrets)
        for field, text, limit in (
            ("service", service, MAX_SERVICE_NAME_CHARS),
            ("endpoint", endpoint, MAX_REPORT_ENDPOINT_CHARS),
            ("parameter", report.parameter, MAX_REPORT_NAME_CHARS),
            ("resource_type", report.resource_type, MAX_REPORT_NAME_CHARS),
        ):
            if len(text) > limit:  # each is quoted in the answer (the endpoint four times): never echoed whole
                rule = f"must be at most {limit} characters"
                return ReportAnswer(InvalidInput(field, cap(text, MAX_REPORT_NAME_CHARS), rule))
        value = report.value
        if len(value) > MAX_REPORT_VALUE_CHARS:  # only quoted in messages: cut, not refused
            value = value[: MAX_REPORT_VALUE_CHARS - 1] + ELLIPSIS
        accepted = bool(service) and (not self._guards.is_own(service) or self._config.service(service).accept_reports)
        if service:
            self._observer.event(ReportAccepted(service, accepted))
        if report.response is None and report.fault is None:  # a pre-check: would the circuit refuse?
            return await self._precheck(report, accepted)
        if report.response is not None and not MIN_STATUS <= report.response.status_code <= MAX_STATUS:
            code = str(report.response.status_code)
            return ReportAnswer(InvalidInput("response.status_code", code, "must be an HTTP status from 100 to 599"))
        obs = Observation(
            service=service or "upstream",
            endpoint=endpoint,
            kind=report.tool_kind,
            parameter=report.parameter,
            value=value,
            resource_type=report.resource_type,
        )
        if report.response is not None:
            r = report.response
            obs = replace(obs, status=r.status_code, headers=dict(r.headers), body=r.body)
        else:
            obs = replace(obs, fault=report.fault or TransportFault.UNSPECIFIED)
        quirks = self._config.service(service).quirks if service else []
        failure = classify(obs, quirks, self._secrets, self._clock.wall())
        charged = failure is not None and is_service_failure(failure)
        guard = self._guards.find(service, create=charged) if accepted else None  # only a charge makes a guard
        if guard is not None:
            self._settle(guard, report, obs, failure)
        if failure is None:
            return ReportAnswer(None)
        failure.with_attempts(report.attempts)
        log_classified(failure, service=service, classified=True, report_accepted=accepted)
        return ReportAnswer(failure)

    def _settle(self, guard: ServiceGuard, report: Report, obs: Observation, failure: SidecarFailure | None) -> None:
        probe = guard.reported_probe(report.job.job_id) if report.probe else None
        if failure is None:
            guard.success(probe or Admission(probe=False, started=self._clock.time()))
        elif is_service_failure(failure):
            guard.failure(probe, trigger_of(obs, failure), failure.retry_after)
        elif probe is not None and obs.status is not None:
            guard.success(probe)  # the service answered the probe: it is up
        elif probe is not None:
            guard.lost(probe)

    async def _precheck(self, report: Report, accepted: bool) -> ReportAnswer:
        """CIRCUIT_OPEN when the circuit would refuse the call; the half-open probe only when ``accepted``."""
        service = report.service
        guard = self._guards.find(service, create=False) if service else None  # a pre-check makes no guard
        if guard is None:
            return ReportAnswer(None)
        if not accepted:  # look, never take the probe: the sidecar's own calls take it
            return ReportAnswer(guard.refusal())
        try:
            admission = guard.check(owner=report.job.job_id)
            await guard.claim(admission)  # a probe: the fleet's one (shared state), else the refusal
        except SidecarFailure as refusal:
            return ReportAnswer(refusal)
        return ReportAnswer(None, probe_granted=admission.probe, service=service)
