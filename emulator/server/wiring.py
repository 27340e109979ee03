"""Wires the daemon together: settings → log → view → services → HTTP server.

The HTTP server starts at once so orchestrators can probe ``/readyz`` (503 with progress) while
the log is replayed; offset reads answer 503 until replay reached the end, never partial state.
While the log itself cannot be opened yet (a cluster that does not answer), the port answers too,
saying why (``emulator.server.starting``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from emulator.connect_cluster.offsets_topics import ConnectorTopics, OpenStore, TopicStore
from emulator.history.adoption import locate
from emulator.history.archive import HistoryArchive, HistoryError
from emulator.history.directory import written_by_a_live_process
from emulator.history.origins import OriginRegistry
from emulator.history.tracked_log import TrackedLog
from emulator.log_throttle import report_all_held
from emulator.logs.base import OffsetLog
from emulator.model.connectors import ConnectorStates, NoConnectCluster
from emulator.model.errors import LogConfigError
from emulator.model.exactly_once import DISABLED, ExactlyOnceSource
from emulator.model.sequences import SequenceTracker
from emulator.server.announce import Announcement, AnnouncingServer, clear_url_file, remove_url_file
from emulator.server.auth import reload as credentials_reload
from emulator.server.auth.config import Security, build_security, metrics_host_rule
from emulator.server.auth.tls import TlsError, TlsFiles, server_context
from emulator.server.connections import (
    MAX_HEAD_BYTES,
    ConnectionGuard,
    fit_descriptor_limit,
    guarded_protocol,
    tls_accepting,
)
from emulator.server.heap import CollectorPauses, collect_young_less_often, freeze_long_lived
from emulator.server.heap_trim import start_trimming
from emulator.server.listen import ListenError, listen_early, listening_on, url_of
from emulator.server.log_format import configure_logging
from emulator.server.metrics_port import serve_metrics, starting_registry
from emulator.server.options import SettingsError
from emulator.server.permissions import exposed
from emulator.server.runtime import Runtime
from emulator.server.settings import Settings, is_loopback
from emulator.server.sink_lag import SinkLag, cluster_sinks
from emulator.server.starting import StartingApp, Startup, logged_sigterm_until_serving, open_answering
from emulator.server.worker_config import exactly_once_source
from emulator.service.checks import ConnectorChecks
from emulator.service.claims import ClaimsService
from emulator.service.connector_stores import SourceOffsets
from emulator.service.health import Health
from emulator.service.history import HistoryQueries
from emulator.service.offsets import OffsetsService
from emulator.service.records import RecordsService
from emulator.service.sink_strategy import SinkStrategy
from emulator.service.sinks import SinkOffsets
from emulator.service.source_strategy import SourceStrategy
from emulator.service.write_guard import WriteGuard
from emulator.service.writer import OffsetsWriter
from emulator.view.offset_view import OffsetView

if TYPE_CHECKING:
    from fastapi import FastAPI

    from emulator.connect_cluster import ConnectCluster
    from emulator.server.metrics import Metrics
    from emulator.server.observability import Observability

log = logging.getLogger(__name__)


def build_log(
    settings: Settings,
    eos: ExactlyOnceSource = DISABLED,
    on_startup_wait: Callable[[str], None] | None = None,
    before_create: Callable[[], None] | None = None,
) -> OffsetLog:
    """The worker's offsets topic (read ``read_committed`` with exactly-once source support, as Connect
    forces it), or the embedded log; ``on_startup_wait`` hears why its ``open`` waits, and
    ``before_create`` (Kafka) runs once the cluster answers, before the topic is created."""
    if settings.embedded:
        from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

        return EmbeddedOffsetLog(
            settings.data_dir,
            partitions=settings.offsets_partitions,
            name=settings.offsets_topic,
            compaction_interval_s=settings.compaction_interval_s,
            startup_timeout_s=settings.startup_timeout_s,
            on_startup_wait=on_startup_wait,
        )
    from emulator.logs.kafka.offsets_log import KafkaOffsetLog

    assert settings.bootstrap_servers is not None
    return KafkaOffsetLog(
        settings.bootstrap_servers,
        topic=settings.offsets_topic,
        partitions=settings.offsets_partitions,
        replication_factor=settings.replication_factor,
        client_config=settings.kafka_config,
        read_committed=settings.read_committed or eos.enabled,
        claims_topic=settings.claims_topic,
        startup_timeout_s=settings.startup_timeout_s,
        tail_fetch_wait_ms=settings.tail_fetch_wait_ms,
        on_startup_wait=on_startup_wait,
        before_create=before_create,
    )


def build_runtime(settings: Settings, origins: OriginRegistry | None = None, startup: Startup | None = None) -> Runtime:
    """``origins`` (history on): the services append through ``TrackedLog`` so that the archive can
    tell the daemon's own records from Connect's. ``startup`` hears each step, and why one waits."""
    startup = startup or Startup()
    eos = exactly_once_source(settings)
    cluster, sinks = build_cluster(settings, eos)
    # The Connect cluster's topics are checked once the broker answers and before the offsets topic
    # is created: a daemon refused for a wrong --config-topic leaves no topic behind on the cluster.
    offset_log = build_log(settings, eos, startup.wait, None if cluster is None else cluster.open)
    startup.begin(f"opening the offsets log {offset_log.description}")
    offset_log.open()
    topics = None
    if cluster is not None and settings.bootstrap_servers is not None:
        topics = ConnectorTopics(
            cluster.state, settings.offsets_topic, settings.bootstrap_servers, eos, topic_store_opener(settings)
        )
    return assemble_runtime(
        offset_log,
        OffsetView(offset_log.description),
        NoConnectCluster() if cluster is None else cluster,
        cluster=cluster,
        sinks=sinks,
        origins=origins,
        tracker=SequenceTracker(settings.sequence_cache_expiry_s),
        write_timeout_s=settings.write_timeout_s,
        topics=topics,
    )


def topic_store_opener(settings: Settings) -> OpenStore:
    """How a connector's own offsets topic is opened: like the worker's (created if missing, with the
    worker's partitions and replication, as Connect's store creates it), without claims, with a view and,
    unless ``--no-history``, an archive of its own (the daemon's writes attributed through ``TrackedLog``)."""
    from emulator.logs.kafka.offsets_log import KafkaOffsetLog

    assert settings.bootstrap_servers is not None
    bootstrap = settings.bootstrap_servers

    def open_store(topic: str, read_committed: bool) -> TopicStore:
        log_ = KafkaOffsetLog(
            bootstrap,
            topic=topic,
            partitions=settings.offsets_partitions,
            replication_factor=settings.replication_factor,
            client_config=settings.kafka_config,
            read_committed=read_committed,
            # Opened (and reopened every few seconds after a failure) while the daemon runs, so its wait
            # for the cluster is bounded by --write-timeout, which its messages must name, not
            # --startup-timeout (which bounds only the worker log's opening, and is unset by default).
            startup_timeout_s=settings.write_timeout_s,
            settings=("--bootstrap-servers", "--write-timeout"),
            claims=False,
            tail_fetch_wait_ms=settings.tail_fetch_wait_ms,
        )
        log_.open()
        view = OffsetView(log_.description)
        service_log: OffsetLog = log_
        archive = None
        if settings.history:
            origins = OriginRegistry()
            archive = history_archive(settings, log_, origins)
            try:
                archive.open()
            except HistoryError:
                log_.close()
                raise
            view.add_listener(archive.listener)
            service_log = TrackedLog(log_, origins)
        try:
            log_.start_reading(view.apply)
        except BaseException:
            log_.close()
            if archive is not None:
                archive.close()
            raise
        return TopicStore(topic, read_committed, service_log, view, archive)

    return open_store


def assemble_runtime(
    offset_log: OffsetLog,
    view: OffsetView,
    states: ConnectorStates,
    *,
    cluster: ConnectCluster | None = None,
    sinks: SinkOffsets | None = None,
    origins: OriginRegistry | None = None,
    tracker: SequenceTracker | None = None,
    write_timeout_s: float = 10.0,
    topics: ConnectorTopics | None = None,
) -> Runtime:
    """The services over an opened log: Connect's checks, the write guard and writer they share,
    and the source and sink strategies behind the KIP-875 service."""
    service_log: OffsetLog = offset_log if origins is None else TrackedLog(offset_log, origins)
    guard = WriteGuard(service_log, states, tracker or SequenceTracker())
    checks = ConnectorChecks(service_log, view, states, refresh_timeout_s=write_timeout_s)
    writer = OffsetsWriter(service_log, view, guard, write_timeout_s)
    source = SourceOffsets(SourceStrategy(view, writer, guard), topics, service_log, view, guard)
    offsets = OffsetsService(service_log, checks, guard, writer, source=source, sink=SinkStrategy(sinks, states, guard))
    return Runtime(
        log=offset_log,
        view=view,
        offsets=offsets,
        claims=ClaimsService(checks, guard, writer, offsets.read_to_end, write_timeout_s, source.claims_refusal),
        records=RecordsService(
            offset_log.description, view, checks, guard, writer, source, read_to_end=offsets.read_sources_to_end
        ),
        history=HistoryQueries(checks),
        health=Health(offset_log, view, cluster, topics),
        cluster=cluster,
        sinks=sinks,
        topics=topics,
        source=source,
    )


def build_cluster(
    settings: Settings, eos: ExactlyOnceSource = DISABLED
) -> tuple[ConnectCluster | None, SinkOffsets | None]:
    """The Connect cluster view (``--config-topic``) and sink offsets, both only on Kafka.

    The cluster's topics are checked by ``open``, which the offsets log calls once the broker
    answers (``build_log``'s ``before_create``), so a wrong name stops the daemon at startup with one
    line naming the setting, instead of a daemon that is never ready.
    """
    if settings.bootstrap_servers is None:
        return None, None
    sinks = SinkOffsets(settings.bootstrap_servers, settings.kafka_config, timeout_s=settings.write_timeout_s)
    if settings.config_topic is None:
        return None, sinks
    for flag, topic in (("--config-topic", settings.config_topic), ("--status-topic", settings.status_topic)):
        if topic == settings.offsets_topic:  # the daemon would write offsets into Connect's own topic
            raise LogConfigError(f"--offsets-topic and {flag} name the same topic '{topic}': Connect keeps them apart")
    from emulator.connect_cluster import ConnectCluster

    cluster = ConnectCluster(
        settings.bootstrap_servers,
        settings.config_topic,
        settings.status_topic,
        client_config=settings.kafka_config,
        read_committed=settings.read_committed or eos.enabled,
        tail_fetch_wait_ms=settings.tail_fetch_wait_ms,
    )
    return cluster, sinks


def history_archive(settings: Settings, log_: OffsetLog, origins: OriginRegistry | None) -> HistoryArchive:
    """The archive of one log, opened already (its ``archive_identity`` is read at open), the archive
    not yet. It reads back from the log what its queue let go while its disk refused writes, so a log
    that compacts itself keeps those records until then."""
    archive = HistoryArchive(
        settings.history_root,
        log_.description,
        archive_identity=log_.archive_identity,
        origins=origins,
        progress=log_.progress,
        read_own_writes=log_.read_own_writes,
        own_write_ends=log_.own_write_ends,
        reread=log_.reread,
        retention_s=settings.history_retention_s,
        rotate_bytes=settings.history_rotate_bytes,
        rotate_interval_s=settings.history_rotate_interval_s,
    )
    log_.keep_records(archive.kept_from)
    return archive


def build_history(settings: Settings, runtime: Runtime, origins: OriginRegistry | None) -> HistoryArchive | None:
    """Open the archive (crash recovery, watermark) and hook it to the view before reading starts,
    so that the replay's records reach it. A directory it may not use stops the daemon at startup;
    one whose disk refuses writes for now does not (``HistoryArchive._defer``)."""
    if not settings.history:
        runtime.log.leave_compaction(
            _archived_elsewhere(settings.history_root, runtime.log.archive_identity, runtime.log.description)
        )
        return None
    archive = history_archive(settings, runtime.log, origins)
    try:
        archive.open()
    except HistoryError as exc:
        raise LogConfigError(f"{exc} (or start with --no-history)") from exc
    if not archive.writable:  # left even once the writer is gone, until this one took the archive over
        runtime.log.leave_compaction(lambda: _left_to(archive))
    runtime.view.add_listener(archive.listener)
    return archive


_LEFT_TO_ARCHIVER = "another process writes this log's history archive; it compacts the log, behind what it archived"
_WRITER_GONE = (
    "this daemon reads the log's history archive read-only and the process that wrote it has stopped: nothing "
    "archives or compacts the log until this daemon is restarted (it then takes the archive over)"
)
_TAKING_OVER = (
    "this daemon reads the log's history archive read-only and the process that wrote it has stopped: it takes "
    "the archive over within seconds, and compacts the log from then on"
)


def _left_to(archive: HistoryArchive) -> str | None:
    """Why a daemon that opened its archive read-only leaves compaction now: to the writing process,
    or to itself once it took the archive over (None: it compacts, behind what it must read back)."""
    if archive.writable:
        return None
    if written_by_a_live_process(archive.directory):
        return _LEFT_TO_ARCHIVER
    return _TAKING_OVER if archive.takes_over else _WRITER_GONE


def _archived_elsewhere(root: Path, identity: str, description: str) -> Callable[[], str | None]:
    """For a daemon without history: whether a daemon that archives the log (in the default history
    directory) runs now, asked at each compaction check since it may start later (and, starting,
    rename an archive an earlier version named: so the directory is located each time too)."""
    return lambda: _LEFT_TO_ARCHIVER if written_by_a_live_process(locate(root, identity, description)) else None


class ReplayReport:
    """Progress on long work, so that a replay of millions of records does not look like a hang: a
    line every ``every_s`` while the daemon is not ready, and a last one (the records read and the
    view at that moment) once it is, never after.

    The daemon's announcement says that last line (``finish``) just before ``ready, serving at``; an
    app served without one (in-process) has it from ``run`` when it sees the daemon ready. Either
    way it is said once, and a progress line is never logged after it.
    ``freeze_heap``: the daemon's, not an in-process app's (``emulator.server.heap``)."""

    CHECK_S = 0.25
    """How often ``run`` looks at readiness between two progress lines (the announcement's longest poll)."""

    def __init__(self, runtime: Runtime, freeze_heap: bool, every_s: float = 5.0) -> None:
        self._runtime = runtime
        self._freeze_heap = freeze_heap
        self._every_s = every_s
        self._lock = threading.Lock()  # finish runs on the announcement's thread, run on the event loop
        self._done = False

    def finish(self) -> None:
        """The replay's last line, with the records read now; said once (later calls do nothing)."""
        with self._lock:
            if self._done:
                return
            self._done = True
            progress = self._runtime.log.progress()
            log.info(
                "offsets log read to end: %d records, %d live keys, %d connectors; serving",
                progress.records_read,
                self._runtime.view.live_keys(),
                len(self._runtime.view.connectors()),
            )
        if self._freeze_heap:
            freeze_long_lived("offsets log read to end")

    async def run(self) -> None:
        next_line = 0.0
        while True:
            progress = self._runtime.log.progress()
            if progress.error is not None:
                with self._lock:
                    self._done = True
                log.error("the offsets log cannot be read; serving 503 until restarted: %s", progress.error)
                return
            if self._done:
                return
            if self._runtime.health.readiness(progress)["ready"]:
                self.finish()
                return
            now = time.monotonic()
            if now >= next_line:
                next_line = now + self._every_s
                self._progress_line()
            await asyncio.sleep(self.CHECK_S)

    def _progress_line(self) -> None:
        with self._lock:  # never after the last line
            if self._done:
                return
            progress = self._runtime.log.progress()
            if not progress.end_offsets:  # the reader has not learnt the topic's partitions and ends yet
                log.info("replaying %s: waiting for the log's end offsets", self._runtime.log.description)
                return
            log.info(
                "replaying %s: %d records read (end offsets sum %d), %d/%d partitions at end",
                self._runtime.log.description,
                progress.records_read,
                sum(progress.end_offsets.values()),
                progress.partitions_done,
                len(progress.end_offsets),
            )


def build_observability(settings: Settings, runtime: Runtime) -> Observability:
    """Access log on or off, and sink connectors' lag for the metrics when a Connect cluster says
    which connectors are sinks."""
    from emulator.server.observability import Observability

    sink_lag = None
    if runtime.cluster is not None and settings.bootstrap_servers is not None:
        from emulator.logs.kafka.config import KafkaClientConfig

        clients = KafkaClientConfig(settings.bootstrap_servers, settings.kafka_config, "sink lag metrics")
        sink_lag = SinkLag(clients, cluster_sinks(runtime.cluster))
    return Observability(access_log=settings.access_log, sink_lag=sink_lag)


def make_app(
    runtime: Runtime,
    history: HistoryArchive | None = None,
    security: Security | None = None,
    observability: Observability | None = None,
    max_body_bytes: int | None = None,
    reading_started: bool = False,
    freeze_heap: bool = False,
) -> FastAPI:
    """The app over ``runtime``; its lifespan starts the log's reading unless ``reading_started``
    (``serve`` starts it before building the app), and with ``freeze_heap`` exempts the view's
    objects from garbage collection once the log is read (``emulator.server.heap``; the daemon's
    process only: a test process would keep its tests' reference cycles forever). FastAPI is
    imported here, not at the top of this module: see ``serve``."""
    from emulator.server.app import create_app
    from emulator.server.routes.params import DEFAULT_MAX_BODY_BYTES

    app = create_app(runtime, security, observability)
    app.state.history = history
    app.state.max_body_bytes = DEFAULT_MAX_BODY_BYTES if max_body_bytes is None else max_body_bytes
    store = security.authenticator.store if security is not None else None

    report = app.state.replay_report = ReplayReport(runtime, freeze_heap)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if not reading_started:
            start_reading(runtime)
        tasks = [asyncio.create_task(report.run())]
        if store is not None:
            tasks.append(asyncio.create_task(credentials_reload.watch(store)))
            credentials_reload.on_sighup(store)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.to_thread(close_runtime, runtime, history)

    app.router.lifespan_context = lifespan
    return app


def start_reading(runtime: Runtime) -> None:
    """The replay of the offsets log (and of the Connect cluster's topics) into the view, on the
    logs' own threads."""
    runtime.log.start_reading(runtime.view.apply)
    if runtime.cluster is not None:
        runtime.cluster.start_reading()
    if runtime.topics is not None:
        runtime.topics.start()


def close_runtime(runtime: Runtime, history: HistoryArchive | None) -> None:
    """Close what the wiring opened, the log first (blocking: call it off the event loop)."""
    runtime.log.close()
    if runtime.topics is not None:
        runtime.topics.close()
    if runtime.cluster is not None:
        runtime.cluster.close()
    if runtime.sinks is not None:
        runtime.sinks.close()
    if history is not None:
        history.close()


def open_storage(
    settings: Settings, origins: OriginRegistry | None, startup: Startup
) -> tuple[Runtime, HistoryArchive | None]:
    """The log, the Connect cluster's readers and the history archive, opened, and the replay
    started (blocking for as long as the storage waits: ``serve`` runs it in a thread)."""
    runtime = build_runtime(settings, origins, startup)
    try:
        startup.begin("opening the history archive")
        history = build_history(settings, runtime, origins)
        # The replay starts now, before the HTTP stack (FastAPI, pydantic, the routes: ~1 s of imports
        # and app building on 2 cores) is imported and built, so that the two overlap: a restore's
        # wall time is mostly waiting for the broker (benchmarks/RESULTS.md, "Issue 12 targets").
        start_reading(runtime)
    except BaseException:
        close_runtime(runtime, None)
        raise
    return runtime, history


def starting_config(
    app: StartingApp, settings: Settings, tls: ssl.SSLContext | None, protocol: type[Any], connections: int
) -> uvicorn.Config:
    """The server that answers while the storage opens: the daemon's TLS and connection limits, no
    lifespan, and uvicorn's own start and stop lines left out (``serve`` and ``open_answering`` say when the
    port starts answering for the storage and when the daemon's app takes over)."""
    from emulator.server.errors import raw_error_response  # the web framework, as in connection_guard

    guard = ConnectionGuard(connections, settings.header_timeout_s, raw_error_response)
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        log_config=None,
        http=http_protocol(guard, protocol, tls),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=2,
        **proxy_options(settings),
    )


def proxy_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's forwarded-header settings: ``X-Forwarded-For``/``-Proto`` believed only from the
    peers ``--forwarded-allow-ips`` names. uvicorn's own default believes them from 127.0.0.1 (or
    from its ``FORWARDED_ALLOW_IPS`` variable): any local client could then put any address in the
    audit line and, for good, in the history."""
    proxies = [p.strip("[]") for p in settings.forwarded_allow_ips or ()]
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": proxies}


def ignored_proxy_variable(environ: Mapping[str, str]) -> str | None:
    """A warning when uvicorn's ``FORWARDED_ALLOW_IPS`` is set: the daemon no longer reads it."""
    if "FORWARDED_ALLOW_IPS" not in environ:
        return None
    return (
        "FORWARDED_ALLOW_IPS is set but not read: forwarded headers are believed only from the proxies "
        "--forwarded-allow-ips (CONNECT_OFFSETS_FORWARDED_ALLOW_IPS) names"
    )


def serve(
    settings: Settings,
    early: socket.socket | ListenError | None = None,
    warnings: Sequence[str] = (),
    bound_at: float | None = None,
) -> None:
    """Bind the port, open the storage, then serve until stopped.

    The port is bound and listening first (``listen.listen_early``), so a client that connects
    during the start waits in the backlog instead of being refused; but storage errors come first:
    they are the more telling ones (a damaged log matters more than a busy port), so a port that
    cannot be bound is reported once the storage is open — or once opening it takes more than
    ``starting.GRACE_S``: then the port answers for the storage meanwhile
    (``emulator.server.starting``). The port is bound here, not by uvicorn, so that a port in use is
    a ``ListenError`` the command line prints, rather than a log record followed by an exit. Once
    ready, the URL (with the port the system picked for ``--port 0``) is printed on stdout and
    written to ``--url-file`` (``emulator.server.announce``); a stale URL file is removed at once.
    """
    configure_logging(settings.log_level, settings.log_format)
    for warning in warnings:  # e.g. a misspelt CONNECT_OFFSETS_* variable (emulator.cli.environment)
        log.warning(warning)
    collect_young_less_often()  # from the start: the replay allocates too
    clear_url_file(settings.url_file)
    # The command line binds it before importing this module; other callers leave it to us.
    bound_early = early if early is not None else listen_early(settings.host, settings.port)

    def bound() -> socket.socket:
        if isinstance(bound_early, ListenError):
            raise bound_early
        return bound_early

    startup = Startup() if bound_at is None else Startup(since=bound_at)  # the grace counts from the binding
    default_sigterm = logged_sigterm_until_serving(startup)
    try:
        _serve(settings, bound, startup, default_sigterm)
    finally:
        default_sigterm()
        if not isinstance(bound_early, ListenError):
            bound_early.close()


def _serve(
    settings: Settings, bound_socket: Callable[[], socket.socket], startup: Startup, default_sigterm: Callable[[], None]
) -> None:
    for warning in exposed(settings):  # before the storage opens: what exists already, as found
        log.warning(warning)
    proxy_warning = ignored_proxy_variable(os.environ)
    if proxy_warning is not None:
        log.warning(proxy_warning)
    security = build_security(settings)
    credentials_reload.sighup_before_serving(security.authenticator.store)
    tls, protocol = tls_options(settings, security)  # h11's protocol with client certificates (auth.tls)
    connections = fit_descriptor_limit(settings.max_connections)
    origins = OriginRegistry() if settings.history else None

    stop_metrics: Callable[[], None] | None = None

    def listen_while_opening() -> socket.socket:
        nonlocal stop_metrics
        sock = bound_socket()
        scheme = "https" if security.tls else "http"
        # A warning when the storage keeps the daemon waiting (a broker that does not answer, a lock):
        # the operator has something to look at; a start that is only slow is said at INFO.
        log.log(
            logging.INFO if startup.waiting is None else logging.WARNING,
            "listening on %s while the daemon starts; not ready until then: %s",
            listening_on(sock, scheme),
            startup.reason(),
        )
        if settings.metrics_port is not None:
            stop_metrics = serve_metrics(
                starting_registry(),
                settings.metrics_host,
                settings.metrics_port,
                settings.header_timeout_s,
                metrics_host_rule(settings),
            )
        return sock

    def open_and_build() -> tuple[Runtime, HistoryArchive | None, FastAPI]:
        """The storage, then the app over it: both in the opening thread, so that the port answers
        for the daemon until the app can (importing and building it takes ~0.6 s here, 2-3 s on a
        loaded machine, during which probes met silence)."""
        runtime, history = open_storage(settings, origins, startup)
        try:
            startup.begin("building the HTTP app")
            observability = build_observability(settings, runtime)
            app = make_app(
                runtime,
                history,
                security,
                observability,
                settings.max_body_bytes,
                reading_started=True,
                freeze_heap=True,
            )
            app.state.write_timeout_s = settings.write_timeout_s  # how long a large body waits its turn
        except BaseException:
            close_runtime(runtime, history)
            raise
        return runtime, history, app

    try:
        (runtime, history, app), bound = open_answering(
            open_and_build,
            listen_while_opening,
            lambda starting: starting_config(starting, settings, tls, protocol, connections),
            startup,
            show_reason=not security.authenticator.mechanisms(),
        )
    finally:
        if stop_metrics is not None:  # the starting one: the daemon's own takes the port below
            stop_metrics()
            stop_metrics = None
    try:
        sock = bound or bound_socket()
        if settings.metrics_port is not None:
            stop_metrics = serve_metrics(
                app.state.metrics.registry,
                settings.metrics_host,
                settings.metrics_port,
                settings.header_timeout_s,
                metrics_host_rule(settings),
            )
    except BaseException:
        close_runtime(runtime, history)
        raise
    url = url_of(sock, "https" if security.tls else "http")
    log.info(
        "connect-offsets emulator on %s, listening on %s (authentication: %s)",
        runtime.log.description,
        listening_on(sock, "https" if security.tls else "http"),
        ", ".join(security.authenticator.mechanisms()) or "none",
    )
    for warning in security.warnings():
        log.warning(warning)
    if stop_metrics is not None:
        log_metrics_url(settings)
    # log_config=None: uvicorn's lines go through our handler (and --log-format) like every other log.
    guard = connection_guard(settings, app.state.metrics, connections)
    config = uvicorn.Config(
        app,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        log_config=None,
        http=http_protocol(guard, protocol, tls),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        **proxy_options(settings),
    )
    stop_gc_metrics = CollectorPauses(app.state.metrics.registry).install()
    stop_trimming = start_trimming(app.state.metrics.registry)
    freeze_long_lived("app built")
    announcement = Announcement(
        url, settings.url_file, lambda: runtime.health.readiness()["ready"], app.state.replay_report.finish
    )
    default_sigterm()  # the server's own shutdown says the rest (logged_sigterm_until_serving)
    try:
        AnnouncingServer(config, announcement, runtime.bulk_lane.close).run(sockets=[sock])
    finally:
        report_all_held()  # the held counts of 503s and client errors, before the process ends
        stop_trimming()
        stop_gc_metrics()
        remove_url_file(settings.url_file)
        if stop_metrics is not None:
            stop_metrics()


def connection_guard(settings: Settings, metrics: Metrics, max_connections: int) -> ConnectionGuard:
    """The limits on connections (``emulator.server.connections``; ``max_connections`` as
    ``fit_descriptor_limit`` fitted it), counted in ``metrics``."""
    from emulator.server.errors import raw_error_response  # the web framework: imported once the app is built

    guard = ConnectionGuard(
        max_connections,
        settings.header_timeout_s,
        raw_error_response,
        lambda reason: metrics.connections_closed.labels(reason).inc(),
    )
    metrics.connections_open.set_function(lambda: len(guard.open_connections))
    return guard


def tls_options(settings: Settings, security: Security) -> tuple[ssl.SSLContext | None, type[Any]]:
    """The TLS context to serve with (None without ``--tls-cert``; loaded here, so a bad file is a
    startup error), and uvicorn's HTTP protocol to run behind it.

    A client certificate is required when it is the only way to authenticate, and optional when
    Basic or tokens can be used instead (``emulator.server.auth.tls``). The daemon does the
    handshakes itself (``connections.tls_accepting``), so uvicorn is given no ``ssl_*`` setting."""
    if settings.tls_cert is None:
        return None, HttpToolsProtocol
    files = TlsFiles(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
    required = not {"basic", "token"} & set(security.authenticator.mechanisms())
    try:
        context = server_context(files, certificate_required=required)
    except TlsError as exc:
        raise SettingsError(str(exc)) from None
    if files.client_ca is None:
        return context, HttpToolsProtocol
    from emulator.server.auth.peer_certificate import PeerCertificateProtocol

    return context, PeerCertificateProtocol


def http_protocol(guard: ConnectionGuard, protocol: type[Any], tls: ssl.SSLContext | None) -> type[Any]:
    """What ``uvicorn.Config(http=...)`` runs: ``protocol`` with ``guard``'s limits, behind the
    daemon's own TLS handshake with ``tls``."""
    guarded = guarded_protocol(guard, protocol)
    return guarded if tls is None else tls_accepting(guard, guarded, tls)


def log_metrics_url(settings: Settings) -> None:
    """Where the metrics are; a WARNING when only this machine can scrape them although the API is
    open to others: ``--metrics-host`` became loopback by default (2026-11-28, eb76890), and a Prometheus on
    another machine that scraped an older daemon would otherwise just see the target go down."""
    url = f"http://{settings.metrics_host}:{settings.metrics_port}/metrics"
    if is_loopback(settings.metrics_host) and not is_loopback(settings.host):
        log.warning(
            "Prometheus metrics on %s, loopback only, while the API listens on %s: a Prometheus on another "
            "machine cannot scrape them; give --metrics-host to open the metrics port (unauthenticated)",
            url,
            settings.host,
        )
    else:
        log.info("Prometheus metrics on %s", url)
