"""The service's metrics (OpenTelemetry): the GenAI conventions' client instruments and Baton's.

- `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`, per model call of the
  runs this service owns (from their `model_finished` events: a replica counts its own runs'
  calls only, so that the replicas' figures add up);
- `baton.runs` (ended, by status and tenant), `baton.runs.active` (queued and running here),
  `baton.admission.refusals` (by reason: overloaded, spending cap), `baton.spend` (dollars, by
  tenant), `baton.sse.followers` (open event streams), `baton.gate.wait` (seconds model calls
  waited at provider gates), `baton.model.fallbacks` (calls a fallback answered) and
  `baton.trace_export.spans` (spans sent to the OTLP backend, or dropped while it was down).

They are read by Prometheus at `/metrics` (a registry of the service's own) and, when an OTLP
endpoint is configured, sent beside the traces every `export_interval_s`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from agents.core.events import Event, ModelFinished, model_attributes
from agents.core.messages import Usage
from tracing import attributes as attr

__all__ = ["PROMETHEUS_CONTENT_TYPE", "ServiceMetrics"]

PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_LATEST
# The conventions' advisory buckets: tokens in powers of 4, durations from 10 ms to 80 s.
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
_DURATION_BUCKETS = [
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
]


class ServiceMetrics:
    """A service's instruments, and where they are read (see the module's docstring).

    Args:
        instance: names this service (the `service.instance.id` of its metrics).
        exporter: OTLP's, when an endpoint is configured.
        export_interval_s: how often the OTLP exporter is given the figures.
    """

    def __init__(
        self,
        instance: str,
        exporter: MetricExporter | None = None,
        export_interval_s: float = 15.0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        readers: list[MetricReader] = [PrometheusMetricReader(registry=self.registry)]
        if exporter is not None:
            interval = int(export_interval_s * 1000)
            readers.append(PeriodicExportingMetricReader(exporter, interval))
        resource = Resource.create({"service.name": "baton", "service.instance.id": instance})
        self._provider = MeterProvider(metric_readers=readers, resource=resource)
        meter = self._provider.get_meter("baton")
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens of model calls, input and output.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="How long model calls took.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._runs = meter.create_counter(
            "baton.runs", unit="{run}", description="Runs that ended here, by status and tenant."
        )
        self._refusals = meter.create_counter(
            "baton.admission.refusals",
            unit="{run}",
            description="Submissions refused before they ran, by reason.",
        )
        self._spend = meter.create_counter(
            "baton.spend", unit="USD", description="What the runs that ended here cost, by tenant."
        )
        self._gate_waits = meter.create_histogram(
            "baton.gate.wait",
            unit="s",
            description="How long model calls waited at provider gates, by model asked.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._fallbacks = meter.create_counter(
            "baton.model.fallbacks",
            unit="{call}",
            description="Model calls answered by a fallback, by model asked and answering.",
        )
        self._scalings = meter.create_counter(
            "baton.agent.scalings",
            unit="{decision}",
            description="Autoscaled hosts' scaling decisions, by host and direction (up, down).",
        )
        self._active: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self._followers: Callable[[], int] = lambda: 0
        self._replicas: dict[str, int] = {}
        self._versions: Callable[[], list[tuple[str, int, bool]]] = list
        meter.create_observable_up_down_counter(
            "baton.system.versions",
            [self._observe_versions],
            unit="{run}",
            description="Each version of the team running here, with the runs it holds "
            "(`baton.system.version`; `baton.version.current`: new runs go to it).",
        )
        meter.create_observable_up_down_counter(
            "baton.agent.replicas",
            [self._observe_replicas],
            unit="{replica}",
            description="Each autoscaled host's replicas taking delegations (`baton.host`).",
        )
        meter.create_observable_up_down_counter(
            "baton.runs.active",
            [self._observe_active],
            unit="{run}",
            description="Runs here now, queued or running (`baton.run.state`).",
        )
        self._access_problem: Callable[[], bool] = lambda: False
        meter.create_observable_up_down_counter(
            "baton.access_file.problems",
            [lambda _: [Observation(int(self._access_problem()))]],
            unit="{problem}",
            description="1 while the access file's latest edit is wrong (the file read before "
            "stays in force), else 0.",
        )
        self._exported: Callable[[], tuple[int, int]] = lambda: (0, 0)
        meter.create_observable_counter(
            "baton.trace_export.spans",
            [self._observe_exported],
            unit="{span}",
            description="Runs' spans sent to the OTLP backend, and those dropped while it was "
            "down (`baton.export.outcome`: sent, dropped).",
        )
        meter.create_observable_up_down_counter(
            "baton.sse.followers",
            [self._observe_followers],
            unit="{stream}",
            description="Event streams open here (SSE, and the protocols' followers).",
        )

    def watch(self, active: Callable[[], tuple[int, int]], followers: Callable[[], int]) -> None:
        """Where the gauges are read: (queued, running) runs here; followers of events."""
        self._active, self._followers = active, followers

    def watch_access(self, wrong: Callable[[], bool]) -> None:
        """Where the access file's state is read: whether its latest edit is wrong."""
        self._access_problem = wrong

    def watch_export(self, counts: Callable[[], tuple[int, int]]) -> None:
        """Where the OTLP export's counts are read: spans sent, spans dropped."""
        self._exported = counts

    def _observe_exported(self, _: CallbackOptions) -> Iterable[Observation]:
        sent, dropped = self._exported()
        return [
            Observation(sent, {"baton.export.outcome": "sent"}),
            Observation(dropped, {"baton.export.outcome": "dropped"}),
        ]

    def watch_versions(self, running: Callable[[], list[tuple[str, int, bool]]]) -> None:
        """Where the versions running are read: (version, runs it holds, whether current)."""
        self._versions = running

    def _observe_versions(self, _: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(runs, {"baton.system.version": v, "baton.version.current": current})
            for v, runs, current in self._versions()
        ]

    def _observe_active(self, _: CallbackOptions) -> Iterable[Observation]:
        queued, running = self._active()
        return [
            Observation(queued, {"baton.run.state": "queued"}),
            Observation(running, {"baton.run.state": "running"}),
        ]

    def _observe_followers(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._followers())]

    def _observe_replicas(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, {"baton.host": host}) for host, n in self._replicas.items()]

    def scaled(self, replicas: dict[str, int], decisions: Iterable[tuple[str, int, int]]) -> None:
        """The autoscaled hosts' replicas now, and the (host, before, after) decisions since."""
        self._replicas = dict(replicas)
        for host, before, after in decisions:
            direction = "up" if after > before else "down"
            self._scalings.add(1, {"baton.host": host, "baton.scaling.direction": direction})

    def saw(self, event: Event) -> None:
        """Count a model call of a run owned here, from its `model_finished` event."""
        if not isinstance(event, ModelFinished):
            return
        common = {
            attr.GEN_AI_OPERATION_NAME: attr.OP_CHAT,
            attr.GEN_AI_PROVIDER_NAME: "unknown",  # (a model named without its provider)
            **model_attributes(event.model),
            attr.GEN_AI_AGENT_NAME: event.agent,
        }
        self._tokens.record(event.input_tokens, {**common, "gen_ai.token.type": "input"})
        self._tokens.record(event.output_tokens, {**common, "gen_ai.token.type": "output"})
        if event.start_ns is not None and event.end_ns is not None:
            self._duration.record((event.end_ns - event.start_ns) / 1e9, common)
        if event.gate_wait_s:
            self._gate_waits.record(event.gate_wait_s, {attr.GEN_AI_REQUEST_MODEL: event.model})
        if event.answered_by:
            self._fallbacks.add(
                1, {attr.GEN_AI_REQUEST_MODEL: event.model, "baton.model.used": event.answered_by}
            )

    def ended(self, status: str, tenant: str, usage: Usage | None) -> None:
        """Count a run that ended here."""
        self._runs.add(1, {"baton.run.status": status, "baton.tenant": tenant})
        if usage is not None and usage.cost_usd:
            self._spend.add(usage.cost_usd, {"baton.tenant": tenant})

    def refused(self, reason: str) -> None:
        """Count a submission refused before it ran (`overloaded`, `spending_cap_reached`)."""
        self._refusals.add(1, {"baton.refusal.reason": reason})

    def prometheus(self) -> bytes:
        """The figures in Prometheus' text format."""
        return generate_latest(self.registry)

    def close(self) -> None:
        """Send what OTLP has not had yet, and stop."""
        self._provider.shutdown()
