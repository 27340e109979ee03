"""Streaming query listeners that publish Spark's completed batches to the daemon.

Why a listener: a source's ``commit(end)`` runs one batch late and ``stop()`` is never called
(docs/spark.md, "When Spark calls a source"), so after ``query.stop()`` the last batch would never reach the
connector. Spark posts a query's progress event after ``commits/N`` is written and the termination
event after the last batch, so on both this listener reads the checkpoint and publishes the end
offsets of the latest batch that has ``commits/N``.

The checkpoint location is asked from the JVM (classic PySpark) when the query starts, or given
explicitly (``checkpoints={name_or_id: dir}``, e.g. under Spark Connect). Without a readable local
checkpoint the listener falls back to the progress events' ``endOffset`` (also never ahead of a
completed batch, but a driver crash can lose the last event). Events arrive asynchronously, and
the publishes run on a thread per query, never on Spark's listener bus (``emulator.spark.query_worker``):
use ``wait_for_termination(query)`` after ``query.stop()`` before handing over to Connect. It waits
for that run's termination: a query restarted from the same checkpoint keeps its id, so a listener
that saw the earlier run end must not answer for the new one. ``query.stop()`` during a batch cuts
it off (``offsets/N`` without ``commits/N``): the batch before it is published, and the termination
says in ``errors`` that batch N's output, which the sink may hold, is produced again by whoever
resumes (``emulator.spark.stopping`` stops between batches instead).

The termination's publish is the handover itself, so it does not give up at the first refusal: a
daemon that is restarting (nothing listens, or it is still reading its log) is asked again for
``termination_retry_s``. If it still fails, ``wait_for_termination`` raises ``HandoffError`` naming
the ``spark-handoff`` command that publishes the same batch from the checkpoint — a connector
started after a silent failure would repeat what Spark already processed.

A daemon that hangs (accepts connections, answers nothing) would otherwise let the publish land
whenever it wakes up, after ``wait_for_termination`` answered False and the caller may have handed
over to Connect: a late write behind Connect's back. So when the wait gives up on a terminated
query, it abandons the query's publishes: no write is sent for it any more (until it is started
again), and the reason — and whether a write had already been sent, which the daemon may still
apply — goes to ``errors`` and the log. A write already sent that is applied later is reported too.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from emulator.client.credentials import Credentials, CredentialsError, redact
from emulator.client.defaults import DEFAULT_URL
from emulator.client.errors import AnswerLost, ClientError, DaemonUnavailable, NotReadyError
from emulator.client.retry_window import RetryWindowError
from emulator.spark.checkpoint import (
    CheckpointError,
    latest_completed_batch,
    parse_offset,
    planned_sources,
    unfinished_batch,
    unfinished_note,
)
from emulator.spark.committer import ClaimRefused, CommitOutcome, DaemonOffsets, Kind, SinkOffsetsUnsupported
from emulator.spark.handoff import CommitTarget, HandoffError, check_claim_epoch, own_entries, publish
from emulator.spark.query_worker import QueryWorkers, Step

log = logging.getLogger(__name__)

_RETRY_PAUSE_S = 0.5

TERMINATION_RETRY_S = 30.0
"""How long the termination's publish keeps asking a daemon that cannot answer now (restarting,
reading its log): long enough for a daemon restart, within ``wait_for_termination``'s 60 s."""

STALE_EPOCH = "<epoch of the claim this job holds now>"
"""What a ``spark-handoff`` command names as ``--claim-epoch`` where the daemon refused the epoch the
listener gave (a newer claim fenced it): the same number would be refused again. Not the epoch the
refusal names: that is the newer claim's, maybe another job's, whose writes this one must not pass for."""

REQUEST_TIMEOUT_S = 30.0
"""How long one request of the listener waits for the daemon's answer (``request_timeout_s``)."""


def named_connectors(offsets: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(source index, connector) of each source whose offset names its connector (``connect-file``,
    ``connect-debezium``), sorted; an offset this cannot read names none."""
    named: list[tuple[int, str]] = []
    for source_id, raw in offsets.items():
        if not str(source_id).isdigit():
            continue
        try:
            own = own_entries(parse_offset(raw))
        except Exception:  # an offset this cannot read only loses its name
            own = None
        if own is not None:
            named.append((int(source_id), own[0]))
    return sorted(named)


class PublishAbandoned(Exception):
    """``wait_for_termination`` gave up on the query: its publishes send no write any more."""


class _GatedOffsets(DaemonOffsets):
    """One query's client: each write passes ``gate(connector)``, which refuses it once
    ``wait_for_termination`` gave up on the query (raising ``PublishAbandoned``) and knows, while the
    write is under way, that a request was sent whose answer has not come back."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        credentials: Credentials | None,
        gate: Callable[[str], contextlib.AbstractContextManager[None]],
    ) -> None:
        super().__init__(url, timeout_s=timeout_s, credentials=credentials)
        self._gate = gate

    def _alter(
        self,
        connector: str,
        changes: list[dict[str, Any]],
        kind: Kind,
        create: bool,
        sequence: tuple[str, int] | None = None,
        claim_epoch: int | None = None,
    ) -> list[dict[str, Any]]:
        with self._gate(connector):
            return super()._alter(connector, changes, kind, create, sequence, claim_epoch)


class ListenerCommitter(StreamingQueryListener):
    """Publishes each completed batch: ``connect-file`` sources to their connector (``own_sources``),
    and other sources as ``targets`` say (see ``CommitTarget``)."""

    def __init__(
        self,
        spark: SparkSession | None = None,
        url: str | None = None,
        targets: Sequence[CommitTarget] = (),
        own_sources: bool = True,
        checkpoints: Mapping[str, str] | None = None,
        dry_run: bool = False,
        *,
        credentials: Credentials | None = None,
        claim_epochs: Mapping[str, int] | None = None,
    ) -> None:
        """``credentials`` left out: ``CONNECT_OFFSETS_TOKEN`` and the other variables
        (``emulator.client.credentials``). ``claim_epochs`` = {connector: epoch}: the job's claims, per
        connector because each connector counts its own epochs; every publish to such a connector
        carries its epoch (a ``CommitTarget``'s own ``claim_epoch`` comes first), since a claimed
        connector refuses commits without it."""
        for connector, epoch in (claim_epochs or {}).items():
            check_claim_epoch(f"claim_epochs[{connector!r}]", epoch)
        self.claim_epochs = dict(claim_epochs or {})
        self._spark = spark if spark is not None else SparkSession.getActiveSession()
        self.credentials = credentials
        self.url = url or os.environ.get("CONNECT_OFFSETS_URL") or DEFAULT_URL
        self.targets = list(targets)
        self.own_sources = own_sources
        self.dry_run = dry_run
        self._explicit = dict(checkpoints or {})
        self._lock = threading.Lock()
        self._checkpoint: dict[str, str | None] = {}
        self._names: dict[str, str | None] = {}
        self._progress: dict[str, tuple[int, dict[str, Any]]] = {}
        self._published: dict[str, tuple[str, int]] = {}
        self._shortfall: dict[str, str | None] = {}
        """Per query: why the connector does not hold the batch last published (``CommitOutcome.shortfall``)."""
        self._terminated: dict[str, threading.Event] = {}
        """Per run id, and per query id for callers that pass an id: set once the termination's publish ended."""
        self.outcomes: list[CommitOutcome] = []
        self.errors: list[str] = []
        self.termination_retry_s = TERMINATION_RETRY_S
        self.request_timeout_s = REQUEST_TIMEOUT_S
        """Per request to the daemon; set before the query starts (each query's client is made once)."""
        self._seen_terminated: set[str] = set()
        """Run ids and query ids whose termination event arrived: only those are abandoned by a wait that gives up."""
        self._abandoned: dict[str, str] = {}
        """Per query: why its publishes send nothing any more (``wait_for_termination`` gave up)."""
        self._writing: dict[str, str] = {}
        """Per query: the connector of a write sent whose answer has not come back."""
        self._last_try: dict[str, str] = {}
        """Per query: why the termination's last try failed, while it is asked again."""
        self._unpublished: dict[str, str] = {}
        """Keyed as ``_terminated``: why a termination's batch was not published (``wait_for_termination`` raises)."""
        self._not_held: dict[str, str] = {}
        """Keyed as ``_terminated``: why the connector does not hold the termination's batch although
        nothing failed (``wait_for_termination`` answers False)."""
        self._clients: dict[str, DaemonOffsets] = {}
        """Per query, used by its publishing thread only: one keep-alive connection while it runs."""
        self._claims: dict[int, str] = {}
        """Per target without ``query=`` (index in ``targets``): the query id that published to it first."""
        self._running: set[str] = set()
        """Query ids started and not terminated: only a running query owns a connector."""
        self._owners: dict[str, str] = {}
        """Per connector: the query id that published to it first while running (``_check_owner``)."""
        self._second_owners: set[tuple[str, str]] = set()
        """(connector, query id) pairs already warned about as a connector's second owner."""
        self._has_targets: dict[str, bool] = {}
        """Per query id, at its last publish: whether a target was its to publish to (not another
        query's). With its own sources' connectors, what decides whether a batch of its cut off
        mid-way concerns a hand-off (``_report_unfinished``)."""
        self._refused: set[tuple[int, str]] = set()
        """(target index, query id) pairs already warned about (said once, not per batch)."""
        self._fenced: dict[str, dict[str, int]] = {}
        """Per query: {connector: the claim epoch the daemon refused for it} since its last publish
        that succeeded; the ``spark-handoff`` command does not repeat that epoch."""
        self._workers = QueryWorkers(self._step)

    # -- listener callbacks (Spark's listener bus; never raise, never wait for the daemon) -----
    def onQueryStarted(self, event: Any) -> None:
        query_id = str(event.id)
        with self._lock:
            self._names[query_id] = event.name
            self._running.add(query_id)
            self._abandoned.pop(query_id, None)  # a new run publishes again
            self._terminated.setdefault(str(event.runId), threading.Event())
            if self._terminated.setdefault(query_id, threading.Event()).is_set():  # a new run of the query
                self._terminated[query_id] = threading.Event()
                self._unpublished.pop(query_id, None)
                self._not_held.pop(query_id, None)
        self._resolve_checkpoint(query_id, event.name)

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        query_id = str(progress.id)
        ends = {str(i): source.endOffset for i, source in enumerate(progress.sources)}
        with self._lock:
            self._names.setdefault(query_id, progress.name)
            self._progress[query_id] = (int(progress.batchId), ends)
            self._running.add(query_id)  # also when this listener was added after the query started
        self._workers.progress(query_id)

    def onQueryIdle(self, event: Any) -> None:
        """Nothing new was completed."""

    def onQueryTerminated(self, event: Any) -> None:
        with self._lock:
            self._seen_terminated.update((str(event.id), str(event.runId)))
            self._running.discard(str(event.id))
        self._workers.terminated(str(event.id), str(event.runId))

    # -- public helpers ------------------------------------------------------------------------
    def wait_for_termination(self, query: Any, timeout_s: float = 60.0) -> bool:
        """Block until the termination of ``query`` has been published; False if it did not come
        within ``timeout_s``, or if it came but the connector does not hold its batch although
        nothing failed: a partition was kept because the connector is further on (another
        checkpoint's query moved it; the reason is in ``errors``), or the offset flattened to no
        partition, so nothing was written. Raises ``HandoffError`` when it came but its batch could not be
        published (the message says how to publish it). Pass the StreamingQuery: its run is waited
        for. A bare query id waits for the termination of the query's latest run the listener saw
        start.

        Every False has its reason in ``errors`` (and a WARNING). When the query's termination
        arrived but its publish did not end within ``timeout_s`` (a daemon that does not answer),
        the publish is abandoned: the query sends no write any more, so nothing it has not sent
        yet lands after this False; a write already sent and not answered may still be applied
        by the daemon, which the reason says (and ``errors`` reports if it is).

        True with an entry in ``errors`` (and a WARNING) when the stop cut a batch off mid-way: the
        connector holds the batch before it, so the hand-off is at-least-once for that batch."""
        run_id = getattr(query, "runId", None)
        query_id = str(getattr(query, "id", query))
        key = str(run_id) if run_id is not None else query_id
        with self._lock:
            done = self._terminated.setdefault(key, threading.Event())
        if not done.wait(timeout_s):
            self._give_up(key, query_id, timeout_s)
            return False
        with self._lock:
            failure = self._unpublished.get(key)
            not_held = self._not_held.get(key)
            checkpoint = self._checkpoint.get(query_id)
            name = self._names.get(query_id)
        if failure is not None:
            raise HandoffError(
                f"{failure}. The connector would repeat what this query processed: before starting it, publish the "
                f"last batch with {self._handoff_commands(checkpoint, name, query_id)} (docs/spark.md, spark-handoff)"
            )
        return not_held is None

    def _give_up(self, key: str, query_id: str, timeout_s: float) -> None:
        """The wait's reason for False. A terminated query's publishes are abandoned here (under the
        lock its writes pass, so a write is either sent before — and named — or never)."""
        with self._lock:
            name = self._names.get(query_id)
            label = self._label(query_id, name)
            if key not in self._seen_terminated:
                message = (
                    f"query {label}: Spark did not report its termination within {timeout_s:g} s "
                    "(call query.stop() first); its publishes go on"
                )
            else:
                sent = self._writing.get(query_id)
                last = self._last_try.get(query_id)
                self._abandoned[query_id] = (
                    f"query {query_id}: the termination's publish was abandoned: the daemon at {redact(self.url)} "
                    f"did not take it within wait_for_termination's {timeout_s:g} s"
                )
                fate = (
                    f"a write to connector {sent!r} was already sent and not answered: the daemon may still apply "
                    "it when it answers (errors will say if it does); nothing else is sent"
                    if sent is not None
                    else "no write of it was sent, and none will be"
                )
                message = (
                    f"query {label}: the daemon at {redact(self.url)} did not take the termination's publish within "
                    f"{timeout_s:g} s{f' (last try: {last})' if last else ''}; the publish is abandoned: {fate} "
                    "for this query until it is started again. The connector may not have the last batch"
                )
            self.errors.append(message)
        log.warning(message)

    @contextlib.contextmanager
    def _write_gate(self, query_id: str, connector: str) -> Iterator[None]:
        """Around each write of the query's: refused once abandoned; a write sent before and
        applied after the wait gave up is reported (it landed behind the caller's back)."""
        with self._lock:
            abandoned = self._abandoned.get(query_id)
            if abandoned is not None:
                raise PublishAbandoned(abandoned)
            self._writing[query_id] = connector
        applied = False
        try:
            yield
            applied = True
        finally:
            with self._lock:
                self._writing.pop(query_id, None)
                late = applied and query_id in self._abandoned
                if late:
                    message = (
                        f"query {query_id}: the write to connector {connector!r} sent before wait_for_termination "
                        "gave up was applied by the daemon after it answered False"
                    )
                    self.errors.append(message)
            if late:
                log.warning(message)

    def _handoff_commands(self, checkpoint: str | None, name: str | None, query_id: str) -> str:
        """The ``spark-handoff`` command per target of the query, with this listener's daemon."""
        # Quoted as a shell reads them: a checkpoint or connector with a space pasted as printed was a usage error.
        where = "--checkpoint " + (shlex.quote(checkpoint) if checkpoint else "<the query's checkpointLocation>")
        base = f"connect-offsets spark-handoff --url {shlex.quote(redact(self.url))} {where}"  # no URL's password
        targets = [
            t
            for i, t in enumerate(self.targets)
            if t.applies_to(name, query_id) and (t.query is not None or self._claims.get(i, query_id) == query_id)
        ]
        if not targets:  # its own sources: the connector is in each source's offset
            named = self._own_connectors(checkpoint, query_id)
            if not named:
                return f"`{base} --connector NAME` per connector and source index"
            return ", ".join(
                f"`{base} --connector {shlex.quote(connector)} --source-index {index}"
                f"{self._epoch_flag(connector, None, query_id)}`"
                for index, connector in named
            )
        return ", ".join(
            f"`{base} --connector {shlex.quote(t.connector)} --source-index {t.source_index}"
            f"{' --kind sink' if t.kind == 'sink' else ''}{self._epoch_flag(t.connector, t.claim_epoch, query_id)}`"
            for t in targets
        )

    def _epoch_flag(self, connector: str, epoch: int | None, query_id: str) -> str:
        """`` --claim-epoch N`` where this listener commits to the connector under a claim: the
        command must carry it as the publish did, or a claimed connector refuses it too. An epoch
        the daemon refused for the connector (a newer claim fenced it) would be refused again: the
        command names ``STALE_EPOCH`` in its place, as the refusal before it says to give the current one."""
        chosen = epoch if epoch is not None else self.claim_epochs.get(connector)
        if chosen is None:
            return ""
        with self._lock:
            refused = self._fenced.get(query_id, {}).get(connector)
        return f" --claim-epoch {STALE_EPOCH if refused == chosen else chosen}"

    def _own_connectors(self, checkpoint: str | None, query_id: str) -> list[tuple[int, str]]:
        """(source index, connector) of each source whose offset names its connector, from the
        checkpoint's last completed batch, else the last progress event; empty when unknown."""
        offsets: Mapping[str, Any] | None = None
        if checkpoint is not None:
            try:
                batch = latest_completed_batch(checkpoint)
            except CheckpointError:
                batch = None
            offsets = batch.sources if batch is not None else None
        if offsets is None:
            with self._lock:
                progress = self._progress.get(query_id)
            offsets = progress[1] if progress is not None else {}
        return named_connectors(offsets)

    # -- internals (on the query's own thread) --------------------------------------------------
    def _new_client(self, query_id: str) -> DaemonOffsets:
        gate = functools.partial(self._write_gate, query_id)
        return _GatedOffsets(self.url, self.request_timeout_s, self.credentials, gate)

    def _client(self, query_id: str) -> DaemonOffsets:
        """Made on first use, inside the publish, so that a client that cannot be made (a CA file
        that cannot be read) is that publish's failure, reported as any other."""
        client = self._clients.get(query_id)
        if client is None:
            client = self._clients[query_id] = self._new_client(query_id)
        return client

    def _step(self, query_id: str, step: Step) -> None:
        if step.kind == "progress":
            self._guarded(query_id, "progress")
            return
        failure: str | None = None
        not_held: str | None = None
        try:
            failure = self._guarded(query_id, "termination", retry_for_s=self.termination_retry_s)
            if failure is None:
                not_held = self._report_shortfall(query_id)
            self._report_unfinished(query_id)
        finally:
            client = self._clients.pop(query_id, None)
            if client is not None:
                client.close()
            keys = [query_id] if step.run_id is None else [query_id, step.run_id]
            with self._lock:
                self._last_try.pop(query_id, None)
                for key in keys:
                    if failure is None:
                        self._unpublished.pop(key, None)  # an earlier run's failure is not this run's
                    else:
                        self._unpublished[key] = failure
                    if not_held is None:
                        self._not_held.pop(key, None)
                    else:
                        self._not_held[key] = not_held
                    self._terminated.setdefault(key, threading.Event()).set()

    def _guarded(self, query_id: str, why: str, retry_for_s: float = 0.0) -> str | None:
        """Publish; None when done, else what failed (logged and kept in ``errors``). A daemon that
        cannot answer now is asked again, 0.5 s apart, for ``retry_for_s``: the publish carries a
        commit sequence, so a repeat is applied at most once."""
        give_up_at = time.monotonic() + retry_for_s
        while True:
            with self._lock:
                abandoned = self._abandoned.get(query_id)
            if abandoned is not None:  # already in errors, said by the wait that gave up
                return abandoned
            try:
                self._publish(query_id)
                with self._lock:
                    self._fenced.pop(query_id, None)
                return None
            except PublishAbandoned as exc:
                return str(exc)
            except (
                ClientError,
                CheckpointError,
                HandoffError,
                SinkOffsetsUnsupported,
                OSError,
                CredentialsError,
                RetryWindowError,
            ) as exc:
                if isinstance(exc, ClaimRefused) and exc.claim_epoch is not None:  # the epoch given is not current
                    with self._lock:
                        self._fenced.setdefault(query_id, {})[exc.connector] = exc.claim_epoch
                now_unable = isinstance(exc, (DaemonUnavailable, AnswerLost, NotReadyError))  # sequenced: safe
                if now_unable and time.monotonic() + _RETRY_PAUSE_S < give_up_at:
                    log.info("query %s: the daemon cannot take the offsets now (%s); asking again", query_id, exc)
                    with self._lock:
                        self._last_try[query_id] = str(exc)
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                message = f"query {query_id}: publishing offsets on {why} failed: {exc}"
                log.warning(message)
            except Exception as exc:  # a listener must not take the listener bus down
                message = f"query {query_id}: unexpected error publishing offsets on {why}: {exc!r}"
                log.exception(message)
            with self._lock:
                self.errors.append(message)
            return message

    def _report_shortfall(self, query_id: str) -> str | None:
        """After the termination's publish: why the connector does not hold the query's last
        published batch (logged and kept in ``errors``), or None."""
        with self._lock:
            shortfall = self._shortfall.get(query_id)
            marker = self._published.get(query_id)
        if shortfall is None:
            return None
        batch = f"batch {marker[1]}" if marker is not None else "the last batch"
        message = f"query {query_id}: the connector does not have {batch} after the termination: {shortfall}"
        log.warning(message)
        with self._lock:
            self.errors.append(message)
        return message

    def _report_unfinished(self, query_id: str) -> None:
        """After the termination: a batch that ``query.stop()`` (or a failure) cut off mid-way is
        said (WARNING and ``errors``), since the hand-off is then at-least-once for it although the
        publish succeeded and ``wait_for_termination`` answers True: its sink may hold output the
        resuming side produces again. Unknown without a readable checkpoint: then nothing is said."""
        with self._lock:
            location = self._checkpoint.get(query_id)
            label = self._label(query_id, self._names.get(query_id))
            has_targets = self._has_targets.pop(query_id, False)
        if location is None:
            return
        try:
            batch = unfinished_batch(location)
            # A query with no connector of its to publish to (a rate source whose target another query
            # holds) hands nothing over: its cut-off batch concerns no connector.
            concerned = batch is not None and (
                has_targets or (self.own_sources and bool(named_connectors(planned_sources(location, batch))))
            )
        except CheckpointError:
            return
        if batch is None or not concerned:
            return
        message = f"query {label}: {unfinished_note(batch)}"
        log.warning(message)
        with self._lock:
            self.errors.append(message)

    def _resolve_checkpoint(self, query_id: str, name: str | None) -> str | None:
        with self._lock:
            if self._checkpoint.get(query_id):
                return self._checkpoint[query_id]
        location = self._explicit.get(query_id) or (self._explicit.get(name) if name else None)
        if location is None and self._spark is not None:
            try:
                jquery = self._spark._jsparkSession.streams().get(query_id)
                if jquery is not None:
                    location = str(jquery.streamingQuery().resolvedCheckpointRoot())
            except Exception as exc:  # Spark Connect or an internal API change: fall back to events
                log.info("query %s: checkpoint location not available from the JVM (%s)", query_id, exc)
        with self._lock:
            self._checkpoint[query_id] = location
        return location

    def _targets_of(self, query_id: str, name: str | None) -> tuple[list[CommitTarget], list[str]]:
        """The targets this query publishes to, and the connectors of those it is refused. A target
        without ``query=`` goes to the first query that publishes to it; another query matching it
        later is skipped for it, with a WARNING and an entry in ``errors`` (once per query), instead
        of overwriting that connector's offsets (and ``wait_for_termination`` answers False for it:
        the connector does not have its batches)."""
        chosen: list[CommitTarget] = []
        refused: list[tuple[CommitTarget, str]] = []
        skipped: list[str] = []
        with self._lock:
            for index, target in enumerate(self.targets):
                if not target.applies_to(name, query_id):
                    continue
                if target.query is None:
                    owner = self._claims.setdefault(index, query_id)
                    if owner != query_id:
                        skipped.append(target.connector)
                        if (index, query_id) not in self._refused:
                            self._refused.add((index, query_id))
                            refused.append((target, owner))
                        continue
                chosen.append(target)
            for target, owner in refused:
                message = (
                    f"query {self._label(query_id, name)}: not publishing to connector {target.connector!r}: "
                    f"{target!r} has no query= and query {self._label(owner, self._names.get(owner))} already "
                    f"publishes to it; give CommitTarget(..., query=name-or-id) to choose the query"
                )
                log.warning(message)
                self.errors.append(message)
        return chosen, skipped

    def _check_owner(self, query_id: str, name: str | None, connectors: Sequence[str]) -> None:
        """Two running queries of the session that publish to one connector both read from its offset,
        so everything is delivered twice, and the connector's offset holds whichever got further:
        said once per query and connector (WARNING and ``errors``) instead of without a word. The
        publish goes on (commits never move the offset back); ``wait_for_termination`` still answers
        for the connector's offset. A query that terminated owns nothing any more: a query started
        after it on the connector (a new checkpoint location) is the hand-over, not a second owner.
        Another Spark application or process is out of this listener's sight: claims fence that."""
        found: list[tuple[str, str]] = []
        messages: list[str] = []
        with self._lock:
            for connector in dict.fromkeys(connectors):
                owner = self._owners.get(connector)
                if owner is None or owner == query_id or owner not in self._running:
                    self._owners[connector] = query_id
                elif (connector, query_id) not in self._second_owners:
                    self._second_owners.add((connector, query_id))
                    found.append((connector, self._label(owner, self._names.get(owner))))
            for connector, owner in found:
                message = (
                    f"query {self._label(query_id, name)} publishes to connector {connector!r}, and so does query "
                    f"{owner}, running in this session: each reads from the connector's offset, so their sinks both "
                    "get the same records, and the connector resumes after whichever got further. Run one query "
                    "per connector. To make a second owner fail loudly across Spark applications and processes, "
                    f"take a claim (`connect-offsets claim {shlex.quote(connector)} --owner JOB`) and give its epoch "
                    f"to every path that commits (option claimEpoch, claim_epochs={{{connector!r}: N}}, "
                    "spark-handoff --claim-epoch): a job without the claim's current epoch has every commit "
                    "refused, with a WARNING and a HandoffError (docs/claims-and-sequences.md)"
                )
                self.errors.append(message)
                messages.append(message)
        for message in messages:
            log.warning(message)

    @staticmethod
    def _label(query_id: str, name: str | None) -> str:
        return f"{name!r} ({query_id})" if name else query_id

    def _publish(self, query_id: str) -> None:
        with self._lock:
            name = self._names.get(query_id)
            progress = self._progress.get(query_id)
        targets, skipped = self._targets_of(query_id, name)
        not_published = [
            f"not published to connector {connector!r}: another query publishes to it (a CommitTarget without query=)"
            for connector in skipped
        ]
        with self._lock:
            self._has_targets[query_id] = bool(targets)
        if not targets and not self.own_sources:
            with self._lock:
                self._shortfall[query_id] = "; ".join(not_published) or None
            return
        location = self._resolve_checkpoint(query_id, name)
        offsets: Mapping[str, Any] | None = None
        marker: tuple[str, int] | None = None
        if location is not None:
            try:
                batch = latest_completed_batch(location)
            except CheckpointError as exc:
                log.info("query %s: using progress events, the checkpoint is not readable here: %s", query_id, exc)
            else:
                if batch is None:
                    return  # no batch completed yet
                offsets, marker = batch.sources, ("checkpoint", batch.batch_id)
        if offsets is None or marker is None:
            if progress is None:
                return
            offsets, marker = progress[1], ("progress", progress[0])
        with self._lock:
            if self._published.get(query_id) == marker:
                return
        indices = {t.source_index for t in targets}
        self._check_owner(
            query_id,
            name,
            [t.connector for t in targets]
            + [c for i, c in named_connectors(offsets) if self.own_sources and i not in indices],
        )
        # The query's id is stable across runs of one checkpoint and batch ids keep counting, so a
        # restarted run that republishes an old batch is dropped by the daemon as stale.
        sequence = (f"spark-query:{query_id}", marker[1])
        outcomes = publish(
            self._client(query_id), offsets, targets, self.own_sources, self.dry_run, sequence, self.claim_epochs
        )
        shortfalls = [*not_published, *(reason for reason in (o.shortfall() for o in outcomes) if reason is not None)]
        with self._lock:
            self._published[query_id] = marker
            self._shortfall[query_id] = "; ".join(shortfalls) or None
            self.outcomes.extend(outcomes)


class OffsetCommitListener(ListenerCommitter):
    """Publishes the last completed batch of every ``connect-file`` source, on progress and on
    termination, so a query stopped between batches hands over exactly (see the module docstring;
    ``stop_between_batches``)."""

    def __init__(
        self,
        spark: SparkSession | None = None,
        url: str | None = None,
        checkpoints: Mapping[str, str] | None = None,
        dry_run: bool = False,
        *,
        credentials: Credentials | None = None,
        claim_epochs: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(spark, url, (), True, checkpoints, dry_run, credentials=credentials, claim_epochs=claim_epochs)
