"""Source connectors whose offsets Connect keeps in a ``ConnectorOffsetBackingStore`` of two parts (KIP-618).

A source connector with its own offsets topic (``offsets.storage.topic``), or any source connector of a
cluster running exactly-once source support, is read and written by Connect through a connector store
and, unless that store is the worker's topic itself, the worker store as well
(``emulator.connect_cluster.offset_stores``; docs/protocol.md §4.7, §5.4). This strategy does what that
store does; every other source connector goes to ``SourceStrategy`` unchanged.

Reads (``store=effective``, Connect's answer): the partitions are the union of both stores'; each
offset is the connector store's, and ``null`` for a partition only the worker store has. The Javadoc
calls the worker store a fallback, but ``KafkaOffsetBackingStore.get`` answers a null for every key it
lacks and ``ConnectorOffsetBackingStore.get`` lets that null replace the worker's value, as Apache
Kafka 4.3.0's class does when run (``tests/integration/test_connector_offsets_topics.py``). ``store=connector``
and ``store=worker`` show each store alone.

Writes, in ``ConnectorOffsetBackingStore.set``'s order (KAFKA-15018): tombstones to the worker store
first, then every record to the connector store, then the other records to the worker store. A failure
of that last step is logged and counted but does not fail the request, as in Connect. Records carry the
same key bytes in both topics, each placed by murmur2 over its own topic's partitions. With
exactly-once source support the connector store is written in one transaction of task 0's
transactional id (``<group.id>-<connector>-0``) after the other task ids of the last fenced generation
were fenced, as the leader does: a zombie task's late commit is then refused by the broker.

Claims (ours) fence writers with a transactional id of their own; a write cannot be fenced by both
that and task 0's, nor span the claims topic and a connector's own topic, so these connectors refuse
claims and claimed writes (409 ``claims_unsupported``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence

from emulator.codec.keys import logical_id
from emulator.codec.murmur2 import partition_for
from emulator.connect_cluster.offset_stores import WORKER_ONLY, ConnectorStores
from emulator.connect_cluster.offsets_topics import ConnectorTopics, TopicStore
from emulator.history.archive import HistoryArchive
from emulator.history.origins import write_origin
from emulator.logs.base import OffsetLog, check_record_size
from emulator.model.errors import ClaimsUnsupported, InvalidRequest, LogUnavailable, LogWriteError, WritePartlyApplied
from emulator.model.offsets import ConnectorOffset
from emulator.model.records import Position
from emulator.service.audit_notes import note_planned
from emulator.service.bodies import OffsetChange, validate_changes
from emulator.service.bulk import bulk_pass
from emulator.service.results import RESET, ModifyResult, PlannedRecord
from emulator.service.source_strategy import SourceStrategy, altered_message, view_offsets
from emulator.service.write_guard import NO_AUTH, WriteAuth, WriteGuard
from emulator.service.writer import AppendTarget, Entries, ImportSection, WriteSection
from emulator.view.offset_view import OffsetView

log = logging.getLogger(__name__)

STORES = ("effective", "connector", "worker")

Done = Callable[[], None] | None
Step = Callable[[Sequence[PlannedRecord], AppendTarget | None, Done], Awaitable[None]]
"""One write of ``ConnectorOffsetBackingStore.set``'s order: records, the log (None: the worker's), then."""


class SourceOffsets:
    """The source strategy of ``OffsetsService``: each connector's offsets where Connect keeps them."""

    def __init__(
        self,
        plain: SourceStrategy,
        topics: ConnectorTopics | None,
        worker_log: OffsetLog,
        worker_view: OffsetView,
        guard: WriteGuard,
    ) -> None:
        self._plain = plain
        self._topics = topics
        self._worker_log = worker_log
        self._worker_view = worker_view
        self._guard = guard
        self.secondary_write_failures = 0

    def connectors(self) -> list[str]:
        return self._plain.connectors()

    def names_version(self) -> int:
        return self._plain.names_version()

    def stores_of(self, connector: str) -> ConnectorStores:
        return WORKER_ONLY if self._topics is None else self._topics.stores_of(connector)

    def _own_store(self, stores: ConnectorStores) -> TopicStore | None:
        """The connector store's log and view when it is a topic of its own (ready), else None."""
        if not stores.separate_topic:
            return None
        assert self._topics is not None
        return self._topics.store(stores)

    @staticmethod
    def _special(stores: ConnectorStores) -> bool:
        """Connect's store differs from the worker store alone: two topics, or transactional writes."""
        return stores.separate_topic or stores.exactly_once

    def claims_refusal(self, connector: str) -> str | None:
        """Why ``connector`` cannot be claimed (None: it can)."""
        stores = self.stores_of(connector)
        if not self._special(stores):
            return None
        why = (
            "its offsets are written in transactions of its task 0's transactional id (exactly-once source)"
            if stores.exactly_once
            else f"its offsets live in its own topic '{stores.connector_topic}' as well as the worker's"
        )
        return f"Connector {connector} cannot be claimed: {why}; write its offsets without a claim"

    # -- reads ----------------------------------------------------------------------------
    async def offsets(self, connector: str, store: str | None = None) -> list[ConnectorOffset]:
        """``store``: ``effective`` (default, Connect's answer), ``connector`` or ``worker``."""
        which = checked_store(store)
        stores = self.stores_of(connector)
        if which == "worker":
            return await self._plain.offsets(connector)
        if which == "connector" and stores.connector_topic is None:
            raise InvalidRequest(_no_connector_store(connector))
        own = self._own_store(stores)
        if own is None:  # the connector store is the worker topic itself
            return await self._plain.offsets(connector)
        primary = await view_offsets(own.view, connector)
        if which == "connector":
            return primary
        return merged_offsets(primary, await self._plain.offsets(connector))

    def version(self, connector: str, store: str | None) -> Hashable:
        """Equal as long as ``offsets(connector, store)`` answers the same: the stores the config gives the
        connector, and the version of each view the answer reads."""
        which = checked_store(store)
        stores = self.stores_of(connector)
        own = None if which == "worker" or not stores.separate_topic else self._own_store(stores)
        return (which, stores, self._plain.version(connector), None if own is None else own.view.version(connector))

    def own_archive(self, connector: str, store: str | None) -> HistoryArchive | None:
        """The history archive of the connector's own offsets topic, unless ``store=worker`` or it has
        none (its offsets are in the worker's topic alone)."""
        which = checked_store(store)
        stores = self.stores_of(connector)
        if which == "connector" and stores.connector_topic is None:
            raise InvalidRequest(_no_connector_store(connector))
        if which == "worker" or not stores.separate_topic:
            return None
        assert self._topics is not None
        own = self._topics.store(stores)
        if own.archive is None:
            raise InvalidRequest(f"The offsets topic '{own.topic}' of connector {connector} has no history archive")
        return own.archive

    def read_to_end(self, connector: str, timeout_s: float) -> None:
        """The connector's own topic read to its current end (blocking; ``?fresh=true``)."""
        own = self._own_store(self.stores_of(connector))
        if own is not None:
            try:
                own.log.read_to_end(timeout_s)
            except LogUnavailable as exc:
                raise LogUnavailable(
                    f"The offsets topic '{own.topic}' cannot be read to its end: {exc.message}"
                ) from exc

    # -- writes ---------------------------------------------------------------------------
    async def alter(
        self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth, section: WriteSection
    ) -> ModifyResult:
        stores = self.stores_of(connector)
        if not self._special(stores):
            return await self._plain.alter(connector, changes, dry_run, auth, section)
        self.refuse_claimed(connector, auth)
        validate_changes(changes)
        sequenced = self._guard.filter_sequence(connector, changes, auth)
        own = self._own_store(stores)
        plan = self._plan(connector, stores, own, sequenced.accepted)
        if not dry_run:
            with write_origin("PATCH", connector):
                await self._write(
                    connector,
                    stores,
                    own,
                    plan,
                    auth,
                    section,
                    on_applied=lambda: self._guard.record_sequence(connector, sequenced.accepted, auth),
                )
        return ModifyResult(
            altered_message(sequenced.accepted, sequenced.dropped), plan.all(), dry_run, sequenced.dropped
        )

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth, section: WriteSection) -> ModifyResult:
        stores = self.stores_of(connector)
        if not self._special(stores):
            return await self._plain.reset(connector, dry_run, auth, section)
        self.refuse_claimed(connector, auth)
        own = self._own_store(stores)
        rows = self._worker_view.offsets(connector) + ([] if own is None else own.view.offsets(connector))
        keys = list(dict.fromkeys(key for row in rows for key in row.keys))
        plan = StorePlan()
        for key in keys:
            plan.add(self, stores, own, key, None)
        await bulk_pass(len(keys), lambda: note_planned(plan.all()))  # audited even if the write then fails
        if not dry_run:
            with write_origin("DELETE", connector):
                await self._write(connector, stores, own, plan, auth, section)
        return ModifyResult(RESET, plan.all(), dry_run)

    @staticmethod
    def refuse_claimed(connector: str, auth: WriteAuth) -> None:
        if auth.claim_epoch is not None:
            raise ClaimsUnsupported(
                f"Connector {connector}'s offsets are written the way Connect writes them for its own offsets "
                "topic or exactly-once source, which a claim cannot fence; write without claim_epoch"
            )

    def _plan(
        self, connector: str, stores: ConnectorStores, own: TopicStore | None, changes: Sequence[OffsetChange]
    ) -> StorePlan:
        """Per partition: every live raw key either store holds for it (the bytes tasks use), else a new
        key in the request's order (``OffsetChange.keys``); the same keys and values for both stores."""
        plan = StorePlan()
        for change in changes:
            value = change.encoded_offset()
            lid = change.partition_id
            found = self._worker_view.find(connector, lid) + (() if own is None else own.view.find(connector, lid))
            for key in change.keys(connector, found):
                plan.add(self, stores, own, key, value)
        return plan

    async def _write(
        self,
        connector: str,
        stores: ConnectorStores,
        own: TopicStore | None,
        plan: StorePlan,
        auth: WriteAuth,
        section: WriteSection,
        on_applied: Callable[[], None] | None = None,
    ) -> None:
        async def step(records: Sequence[PlannedRecord], target: AppendTarget | None, done: Done) -> None:
            await section.append(records, auth, done, target)

        await self._in_order(connector, self._primary_target(connector, stores, own), plan, step, on_applied)

    async def _in_order(
        self, connector: str, primary: AppendTarget, plan: StorePlan, step: Step, on_applied: Done = None
    ) -> None:
        """``ConnectorOffsetBackingStore.set``: tombstones to the worker store, everything to the connector
        store (in task 0's transaction with exactly-once source), the rest to the worker store."""
        if plan.secondary_tombstones:
            await step(plan.secondary_tombstones, None, None)
        await step(plan.primary, primary, on_applied)
        if not plan.secondary_values:
            return
        try:
            await step(plan.secondary_values, None, None)
        except (LogWriteError, LogUnavailable, WritePartlyApplied) as exc:
            if isinstance(exc, WritePartlyApplied) and not isinstance(exc.cause, LogWriteError | LogUnavailable | None):
                raise  # refused for another reason than the log's (a fence): as before this error had its own kind
            # Connect writes these fire-and-forget and only logs a failure: reads take the connector store's value.
            self.secondary_write_failures += 1
            log.warning(
                "Failed to write offsets of connector %s to the worker's offsets topic (the secondary store): %s",
                connector,
                exc.message,
            )

    # -- raw records (imports, exports, rollbacks: emulator.service.records) -----------------
    def special(self, connector: str) -> bool:
        """Whether Connect reads and writes ``connector`` through a combined store (not the worker's alone)."""
        return self._special(self.stores_of(connector))

    def separate_topic_connectors(self) -> list[str]:
        """Source connectors whose config names an offsets topic of their own (besides the worker's)."""
        return [] if self._topics is None else self._topics.separate_topic_connectors()

    def records_store(self, connector: str, store: str | None) -> TopicStore | None:
        """Where ``store`` of ``connector`` keeps its raw records when that is not the worker's topic:
        the connector's own topic for ``effective`` and ``connector``; None for the worker's topic."""
        which = checked_store(store)
        stores = self.stores_of(connector)
        if which == "connector" and stores.connector_topic is None:
            raise InvalidRequest(_no_connector_store(connector))
        return None if which == "worker" else self._own_store(stores)

    def primary_value(self, connector: str, key: bytes) -> bytes | None:
        """The live value of ``key`` in the store Connect reads it from (the connector store when there is one)."""
        own = self._own_store(self.stores_of(connector))
        entry = (self._worker_view if own is None else own.view).get_raw(key)
        return None if entry is None else entry.value

    def primary_view(self, connector: str) -> OffsetView:
        own = self._own_store(self.stores_of(connector))
        return self._worker_view if own is None else own.view

    def plan_raw(self, connector: str, records: Sequence[tuple[bytes, bytes | None]]) -> StorePlan:
        """Raw records (exact key bytes, tombstones included) for both stores, as Connect's ``set`` writes them."""
        stores = self.stores_of(connector)
        own = self._own_store(stores)
        plan = StorePlan()
        for key, value in records:
            plan.add(self, stores, own, key, value)
        return plan

    async def write_planned(self, connector: str, plan: StorePlan, section: WriteSection) -> None:
        """A rollback's write, in the connector's own section."""
        stores = self.stores_of(connector)
        await self._write(connector, stores, self._own_store(stores), plan, NO_AUTH, section)

    async def write_planned_locked(self, connector: str, plan: StorePlan, section: ImportSection) -> None:
        """An import's write, in the sections of the connectors it names (``OffsetsWriter.sections``)."""

        async def step(records: Sequence[PlannedRecord], target: AppendTarget | None, done: Done) -> None:
            await section.append([(r.key, r.value) for r in records], connector, target=target)
            if done is not None:
                done()

        stores = self.stores_of(connector)
        await self._in_order(connector, self._primary_target(connector, stores, self._own_store(stores)), plan, step)

    def _primary_target(self, connector: str, stores: ConnectorStores, own: TopicStore | None) -> AppendTarget:
        log_, view = (self._worker_log, self._worker_view) if own is None else (own.log, own.view)
        if not stores.exactly_once:
            return AppendTarget(log_.description, log_.append, view)
        assert self._topics is not None
        topics = self._topics
        transactional_id = topics.eos.transactional_id(connector, 0)
        fence_also = topics.fence_ids(connector)

        def append(entries: Entries, timeout_s: float) -> list[Position]:
            return log_.append_transactional(transactional_id, entries, timeout_s, fence_also)

        return AppendTarget(f"{log_.description} (transactional id {transactional_id})", append, view)

    def placed(
        self, stores: ConnectorStores, own: TopicStore | None, key: bytes, value: bytes | None
    ) -> tuple[PlannedRecord, PlannedRecord | None]:
        """The record for the connector store and, with two stores, the worker store's."""
        check_record_size(self._worker_log, key, value)  # every store's producers share the daemon's config
        worker_count = self._worker_log.partition_count
        if own is None:
            record = PlannedRecord(
                key, value, partition_for(key, worker_count), self._worker_view.get_raw(key) is not None
            )
            return record, None
        primary = PlannedRecord(
            key, value, partition_for(key, own.log.partition_count), own.view.get_raw(key) is not None, own.topic
        )
        secondary = PlannedRecord(
            key,
            value,
            partition_for(key, worker_count),
            self._worker_view.get_raw(key) is not None,
            self._topics.worker_topic if self._topics is not None else None,
        )
        return primary, secondary


class StorePlan:
    """The records of one write, by store and step."""

    def __init__(self) -> None:
        self.secondary_tombstones: list[PlannedRecord] = []
        self.primary: list[PlannedRecord] = []
        self.secondary_values: list[PlannedRecord] = []

    def add(
        self, owner: SourceOffsets, stores: ConnectorStores, own: TopicStore | None, key: bytes, value: bytes | None
    ) -> None:
        primary, secondary = owner.placed(stores, own, key, value)
        self.primary.append(primary)
        if secondary is not None:
            (self.secondary_tombstones if value is None else self.secondary_values).append(secondary)

    def all(self) -> list[PlannedRecord]:
        """In the order they are written."""
        return [*self.secondary_tombstones, *self.primary, *self.secondary_values]


def checked_store(store: str | None) -> str:
    which = store or "effective"
    if which not in STORES:
        raise InvalidRequest(f"store must be one of {', '.join(STORES)}, got {store!r}")
    return which


def _no_connector_store(connector: str) -> str:
    return (
        f"Connector {connector} has no connector-specific offsets store (offsets.storage.topic is not set and "
        "exactly-once source support is off): its offsets are in the worker's topic, store=worker"
    )


def merged_offsets(
    connector_rows: Sequence[ConnectorOffset], worker_rows: Sequence[ConnectorOffset]
) -> list[ConnectorOffset]:
    """``ConnectorOffsetBackingStore``'s answer: the union of partitions, each with the connector store's
    offset, ``null`` where only the worker store has the partition (its null masks the worker's value)."""
    result = list(connector_rows)
    seen = {logical_id(row["partition"]) for row in connector_rows}
    for row in worker_rows:
        lid = logical_id(row["partition"])
        if lid not in seen:
            seen.add(lid)
            result.append(ConnectorOffset(partition=row["partition"], offset=None))
    return result
