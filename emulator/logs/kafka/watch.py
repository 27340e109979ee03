"""Is the Kafka cluster answering, and does the claims topic exist? Learned in the background.

Two questions the request path must not ask the broker itself. A metadata lookup per PATCH costs a
round trip on every write, and during a broker stall it is the request that hangs and then fails
(a 45 s stall used to end in a 500 "Failed to get metadata" from such a lookup). So one thread asks,
every ``interval_s``, for the claims topic's metadata, and the answer serves both questions:

- **reachability**, for ``/readyz``: a metadata request that fails or does not return within
  ``probe_timeout_s`` is a failure observed now, not a guess; the next answered one ends it;
- **the claims topic's existence**: a daemon that never claims still learns, within one interval,
  that another daemon created the topic, and from then on checks claims before every write.

A failed probe is also kept as the log's last error (``errors``, ``emulator.logs.last_error``), for
``/status`` ``reader.last_error`` and ``connect_offsets_reader_last_error_timestamp_seconds``: librdkafka
reports no error for a broker that stops answering without closing its connections (a stalled or
paused process; ``socket.timeout.ms`` is a minute), so an idle daemon that lived through a 20 s outage
kept no trace of it once ``/readyz`` answered 200 again. Only a failure is kept: an answered probe
records nothing.

librdkafka sends a metadata request for a named topic to a broker each time (it does not answer
from its cache), with ``allow.auto.create.topics=false`` (``emulator.logs.kafka.config``), so the
probe never creates the topic it asks about.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from emulator.logs.last_error import LastError
from emulator.model.errors import LogConfigError

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 2.0


class BrokerWatch:
    """Probes the cluster on its own thread; ``unreachable()`` and ``topic_exists`` read the last answer."""

    def __init__(
        self,
        admin: AdminClient,
        bootstrap: str,
        topic: str,
        *,
        on_topic: Callable[[], None] | None = None,
        errors: LastError | None = None,
        interval_s: float = PROBE_INTERVAL_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        """``errors``: where every failed probe is remembered (the log's last error); the watch logs
        an outage's first failure and its end itself."""
        self._admin = admin
        self._errors = errors
        self._bootstrap = bootstrap
        self._topic = topic
        self._on_topic = on_topic
        self.interval_s = interval_s
        self._probe_timeout_s = probe_timeout_s
        self._lock = threading.Lock()
        self._failure: str | None = None
        self._failing_since: float | None = None
        self._topic_exists = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def topic_exists(self) -> bool:
        """The watched topic was in the last answered metadata (stays true once seen)."""
        with self._lock:
            return self._topic_exists

    def saw_topic(self) -> None:
        """This daemon created or opened the topic itself: no need to wait for the next probe."""
        with self._lock:
            self._topic_exists = True

    def unreachable(self) -> str | None:
        """Why the cluster cannot be reached now (the last probe failed), or None."""
        with self._lock:
            if self._failure is None or self._failing_since is None:
                return None
            return f"{self._failure} (failing for {time.monotonic() - self._failing_since:.1f} s)"

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name=f"broker-watch-{self._topic}", daemon=True)
        self._thread = thread
        thread.start()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._probe_timeout_s + 1.0)

    def probe(self) -> None:
        """One metadata request; records the outcome (also callable directly, e.g. by tests)."""
        started = time.monotonic()
        try:
            metadata = self._admin.list_topics(topic=self._topic, timeout=self._probe_timeout_s)
        except KafkaException as exc:
            message = (
                f"the Kafka cluster at {self._bootstrap} did not answer a metadata request within "
                f"{self._probe_timeout_s:g} s: {exc.args[0] if exc.args else exc}"
            )
            with self._lock:
                outage = started if self._failing_since is None else self._failing_since
            # a client's error in the probe interval before the outage was seen belongs to it too
            cause = None if self._errors is None else self._errors.client_error_since(outage - self.interval_s)
            self._failed(message if cause is None else f"{message}; the clients' last error: {cause}", started)
            return
        found = metadata.topics.get(self._topic)
        exists = found is not None and found.error is None and bool(found.partitions)
        with self._lock:
            recovered = self._failure is not None
            self._failure = None
            self._failing_since = None
            newly_seen = exists and not self._topic_exists
            self._topic_exists = self._topic_exists or exists
        if recovered:
            log.warning("the Kafka cluster at %s answers again", self._bootstrap)
        if newly_seen and self._on_topic is not None:
            self._on_topic()

    def _failed(self, message: str, started: float) -> None:
        with self._lock:
            first = self._failure is None
            self._failure = message
            if self._failing_since is None:
                self._failing_since = started
        if self._errors is not None:
            self._errors.remember(message)
        if first:
            log.warning("%s; /readyz answers 503 until it does", message)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.probe()
            except Exception as exc:  # never die: a watch that stops would report "reachable" forever
                log.error("broker watch for %s failed: %r", self._bootstrap, exc)
                if self._errors is not None:
                    self._errors.remember(f"broker watch failed: {exc!r}")
            self._stop.wait(self.interval_s)


STARTUP_PROGRESS_S = 5.0


def wait_for_cluster(
    admin: AdminClient,
    bootstrap: str,
    topic: str,
    timeout_s: float | None,
    on_wait: Callable[[str], None] | None = None,
    settings: tuple[str, str] = ("--bootstrap-servers", "--startup-timeout"),
) -> None:
    """Return once the cluster answers a metadata request; say so at once when it does not.

    Without this, a daemon pointed at a cluster that is down (or at a wrong address) said nothing
    for half a minute and then reported that it could not *create* the offsets topic. Now the first
    line names the bootstrap servers within ``PROBE_TIMEOUT_S``, a progress line follows every
    ``STARTUP_PROGRESS_S``, and with ``timeout_s`` (``--startup-timeout``) it gives up with
    ``LogConfigError`` (the command line prints it and exits) instead of waiting for ever.
    ``on_wait`` hears every failed attempt's reason, for the daemon's answers while it starts
    (``emulator.server.starting``). ``settings`` names where the address and the deadline came from
    (a transfer's are ``--to``/``--from`` and ``--timeout``).
    """
    address, deadline = settings
    started = time.monotonic()
    reported_at: float | None = None
    while True:
        try:
            admin.list_topics(topic=topic, timeout=PROBE_TIMEOUT_S)
        except KafkaException as exc:
            why = str(exc.args[0] if exc.args else exc)
        else:
            if reported_at is not None:
                log.warning("reached the Kafka cluster at %s after %.1f s", bootstrap, time.monotonic() - started)
            return
        waited = time.monotonic() - started
        if on_wait is not None:
            on_wait(f"cannot reach the Kafka cluster at {bootstrap} ({address}): {why}")
        if timeout_s is not None and waited >= timeout_s:
            raise LogConfigError(
                f"cannot reach the Kafka cluster at {bootstrap} ({address}) within {timeout_s:g} s ({deadline}): {why}"
            )
        if reported_at is None or time.monotonic() - reported_at >= STARTUP_PROGRESS_S:
            limit = "" if timeout_s is None else f" of {timeout_s:g} s ({deadline})"
            log.warning(
                "cannot reach the Kafka cluster at %s (%s): %s; still trying, %.0f s so far%s",
                bootstrap,
                address,
                why,
                waited,
                limit,
            )
            reported_at = time.monotonic()
        time.sleep(0.2)
