"""ClassifyFailure: what an agent's own tool saw, mapped onto the very failure ExecuteTool would give.

a pre-check (nothing observed)   the circuit would refuse: CIRCUIT_OPEN; half-open: this caller is
                                 granted the one probe (for its job id); else no failure
a response or a transport fault  core.tool_failures.classify, exactly as ExecuteTool; with a named
                                 service, the outcome feeds its throttle and circuit:
    success                      a success (a probe report from the probe's holder closes it)
    a service failure            charged, quoting what the service said
    anything else on a probe     the service answered: it is up; no answer: the probe is lost
"""

from __future__ import annotations

from dataclasses import replace

from sidecar.config import Config
from sidecar.core.circuit import Admission, ServiceGuards
from sidecar.core.clock import Clock
from sidecar.core.conversation import Report, ReportAnswer
from sidecar.core.kinds import TransportFault
from sidecar.core.taxonomy import InvalidInput, SidecarFailure, log_failure
from sidecar.core.text import endpoint_of
from sidecar.core.tool_failures import Observation, classify, is_service_failure, trigger_of

__all__ = ["Reports"]

MIN_STATUS, MAX_STATUS = 100, 599


class Reports:
    """Classifies reports and feeds them to the service guards."""

    __slots__ = ("_clock", "_config", "_guards", "_secrets")

    def __init__(self, config: Config, clock: Clock, guards: ServiceGuards) -> None:
        self._config = config
        self._clock = clock
        self._guards = guards
        self._secrets = config.secrets()

    def classify(self, report: Report) -> ReportAnswer:
        service = report.service
        guard = self._guards.find(service) if service else None
        if report.response is None and report.fault is None:  # a pre-check: would the circuit refuse?
            if guard is None:
                return ReportAnswer(None)
            try:
                admission = guard.check(owner=report.job.job_id)
            except SidecarFailure as refusal:
                return ReportAnswer(refusal)
            return ReportAnswer(None, probe_granted=admission.probe, service=service)
        if report.response is not None and not MIN_STATUS <= report.response.status_code <= MAX_STATUS:
            code = str(report.response.status_code)
            return ReportAnswer(InvalidInput("response.status_code", code, "must be an HTTP status from 100 to 599"))
        obs = Observation(
            service=service or "upstream",
            endpoint=endpoint_of(report.endpoint, self._secrets),
            kind=report.tool_kind,
            parameter=report.parameter,
            value=report.value,
            resource_type=report.resource_type,
        )
        if report.response is not None:
            r = report.response
            obs = replace(obs, status=r.status_code, headers=dict(r.headers), body=r.body)
        else:
            obs = replace(obs, fault=report.fault or TransportFault.UNSPECIFIED)
        quirks = self._config.service(service).quirks if service else []
        failure = classify(obs, quirks, self._secrets, self._clock.wall())
        if guard is not None:
            probe = guard.reported_probe(report.job.job_id) if report.probe else None
            if failure is None:
                guard.success(probe or Admission(probe=False, started=self._clock.time()))
            elif is_service_failure(failure):
                guard.failure(probe, trigger_of(obs, failure), failure.retry_after)
            elif probe is not None and obs.status is not None:
                guard.success(probe)  # the service answered the probe: it is up
            elif probe is not None:
                guard.lost(probe)
        if failure is None:
            return ReportAnswer(None)
        failure.with_attempts(report.attempts)
        log_failure(failure, service=service, classified=True)
        return ReportAnswer(failure)
