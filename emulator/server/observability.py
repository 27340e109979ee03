"""Puts the access log, the audit line and the metrics on an app (called once, from ``create_app``).

The options come from the settings (``--no-access-log``, sink lag when there is a Connect cluster);
``create_app`` without options gives the defaults, so an app built in a test logs and counts like
the daemon does.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI

from emulator.history.archive import HistoryArchive
from emulator.server.access_log import RequestObserver
from emulator.server.audit import Auditor
from emulator.server.deps import Runtime
from emulator.server.metrics import Metrics
from emulator.server.metrics_state import StateCollector
from emulator.server.sink_lag import SinkLag


@dataclass(frozen=True, slots=True)
class Observability:
    access_log: bool = True
    """Write an access line per request (logger ``emulator.access``, INFO)."""
    sink_lag: SinkLag | None = None
    """Sink connectors' consumer-group lag for the metrics (needs a Connect cluster's config topic)."""


def install_observability(app: FastAPI, runtime: Runtime, options: Observability) -> Metrics:
    """Add the request observer (outermost, if added after every other middleware) and the metrics
    registry (``app.state.metrics``, which ``/metrics`` and ``--metrics-port`` serve)."""

    def history() -> HistoryArchive | None:
        archive: HistoryArchive | None = getattr(app.state, "history", None)
        return archive

    def known(connector: str) -> bool:
        cluster = runtime.cluster
        return runtime.view.knows(connector) or (cluster is not None and bool(cluster.exists(connector)))

    def ready() -> bool:
        return bool(runtime.health.readiness()["ready"])

    state = StateCollector(
        runtime.log, runtime.view, runtime.cluster, history, ready, topics=runtime.topics, sink_lag=options.sink_lag
    )
    metrics = Metrics(state)
    lane = runtime.bulk_lane
    metrics.large_writes.labels("running").set_function(lambda: lane.running)
    metrics.large_writes.labels("waiting").set_function(lambda: lane.waiting)
    app.state.metrics = metrics
    app.add_middleware(RequestObserver, auditor=Auditor(metrics, known), metrics=metrics, access_log=options.access_log)
    return metrics
