"""Raw offsets records through the daemon: byte-exact export and import, and history rollbacks.

KIP-875 bodies carry parsed JSON, so they cannot move a key whose bytes differ from Jackson's
canonical form, or a key Connect ignores; backups, restores, migrations and rollbacks need the
bytes themselves. Every write here follows the same rules as PATCH: the config topic refreshed,
STOPPED connectors only, no unpresented claim, read-your-writes; and no value Connect's reader
cannot read back (``emulator.codec.readable``) unless the caller says ``allow_malformed``, in which
case the answer counts them. A rollback, like a reset, first reads the log to its end: it writes a
diff against the current state, so that state must hold every write acknowledged before it.
"""

from __future__ import annotations

import asyncio
import base64
import operator
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TypedDict

from emulator.codec.key_forms import KeyForm, key_form
from emulator.codec.readable import ValueProblem, value_problem
from emulator.connect_cluster.offsets_topics import TopicStore
from emulator.formats.diff import Diff, compute_diff
from emulator.formats.model import KeyIndex, RawRecord, connector_of
from emulator.history.archive import HistoryArchive
from emulator.history.files import ReadReport
from emulator.history.origins import write_origin
from emulator.history.rollback import RollbackChange, current_state, plan_rollback
from emulator.model.connectors import not_stopped_message
from emulator.model.errors import ConnectorNotFound, HistoryBehind, HistoryDamaged, InvalidRequest, NotStopped
from emulator.model.times import format_time_ms
from emulator.service.audit_notes import note_rollback_plan
from emulator.service.bulk import bulk_pass
from emulator.service.checks import ConnectorChecks
from emulator.service.connector_stores import SourceOffsets, checked_store
from emulator.service.history import read_past
from emulator.service.write_guard import NO_AUTH, WriteGuard
from emulator.service.writer import Deadline, ImportSection, OffsetsWriter, WriteSection, check_writer_within
from emulator.view.offset_view import Entry, OffsetView


class ExportedRecord(TypedDict):
    """One live record of ``GET /offsets/records``: base64 key and value, and where it sits in the log."""

    key: str
    value: str
    connector: str | None
    kafka_partition: int
    offset: int
    timestamp_ms: int
    store: str
    """``worker`` (the daemon's offsets log) or ``connector`` (the connector's own offsets topic, ``topic``)."""
    topic: str | None
    """The connector's own offsets topic for ``store=connector`` records; None for the worker's log."""


class RecordsExport(TypedDict):
    source: str
    """The log's description, e.g. ``kafka://host:9092/connect-offsets``."""
    records: list[ExportedRecord]
    skipped_null_keys: int
    """Keyless records cannot be imported anywhere (a compacted topic refuses them), so they are counted."""
    store: str
    """Which store was read: ``effective`` (as Connect reads each connector), ``connector`` or ``worker``."""
    masked_worker_records: int
    """``effective``: worker-topic records of connectors with their own topic, left out because Connect
    does not read them (the connector store's answer wins, a null where it has none)."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    diff: Diff
    written: int
    dry_run: bool
    unreadable_values: int = 0
    """Records written (or, in a dry run, to be written) whose value Connect cannot read back;
    non-zero only with ``allow_malformed``."""
    unread_keys: int = 0
    """Values written (or to be) under keys in bytes no converter writes (``key_forms.FOREIGN``):
    Connect lists their partitions, but no task and no GET reads these values."""


@dataclass(frozen=True, slots=True)
class RollbackResult:
    at_ms: int
    changes: list[RollbackChange]
    dry_run: bool
    report: ReadReport
    """What the archive read met: damaged files (``report.damaged``) mean the target state may lack
    their skipped records."""


def _exported(key: bytes, entry: Entry, connector: str | None, topic: str | None) -> ExportedRecord:
    return {
        "key": _b64(key),
        "value": _b64(entry.value),
        "connector": connector,
        "kafka_partition": entry.partition,
        "offset": entry.offset,
        "timestamp_ms": entry.timestamp_ms,
        "store": "worker" if topic is None else "connector",
        "topic": topic,
    }


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _shown(raw: bytes) -> str:
    if not raw:
        return "(empty: 0 bytes)"
    return raw[:200].decode("utf-8", "backslashreplace") + ("…" if len(raw) > 200 else "")


def unreadable_values(records: list[RawRecord]) -> dict[int, ValueProblem]:
    """Index → problem for every record whose value Connect's reader would not read back."""
    found: dict[int, ValueProblem] = {}
    for index, record in enumerate(records):
        problem = value_problem(record.value)
        if problem is not None:
            found[index] = problem
    return found


def unreadable_message(
    records: list[RawRecord], problems: dict[int, ValueProblem], hint: str = "", *, indexed: bool = True
) -> str:
    """One refusal naming how many values, the first record (its index in the request, its key) and why."""
    index, problem = next(iter(problems.items()))
    first = f"records[{index}], key " if indexed else "key "
    return (
        f"{len(problems)} record value(s) Connect cannot read back (first: {first}{_shown(records[index].key)}: "
        f"{problem.describe()}); a task would get no offset for them. Nothing was written{hint}"
    )


def _in_log_order(records: list[ExportedRecord]) -> list[ExportedRecord]:
    """``records`` by topic, Kafka partition and offset. Not one sort of them all: a sort is a single C
    call that holds the interpreter lock throughout (0.2–0.4 s for 200,000 records, every request on
    the event loop waiting), while per-partition buckets, already nearly in offset order, sort in
    milliseconds each."""
    buckets: dict[tuple[str, int], list[ExportedRecord]] = {}
    for record in records:
        buckets.setdefault((record["topic"] or "", record["kafka_partition"]), []).append(record)
    ordered: list[ExportedRecord] = []
    for where in sorted(buckets):
        bucket = buckets[where]
        bucket.sort(key=_offset)
        ordered.extend(bucket)
    return ordered


_offset = operator.itemgetter("offset")


class RecordsService:
    def __init__(
        self,
        log_description: str,
        view: OffsetView,
        checks: ConnectorChecks,
        guard: WriteGuard,
        writer: OffsetsWriter,
        stores: SourceOffsets | None = None,
        *,
        read_to_end: Callable[[Collection[str], Deadline], Awaitable[None]],
    ) -> None:
        """``stores``: where Connect keeps each source connector's offsets (KIP-618 connector stores).
        ``read_to_end(connectors, deadline)``: read the logs that hold the connectors' offsets to their
        current ends (``OffsetsService.read_sources_to_end``), which a rollback and an import do before
        they plan."""
        self._log_description = log_description
        self._view = view
        self._checks = checks
        self._guard = guard
        self._writer = writer
        self._stores = stores
        self._read_to_end = read_to_end

    def _special(self, connector: str | None) -> bool:
        return connector is not None and self._stores is not None and self._stores.special(connector)

    def export(self, connectors: list[str] | None = None, store: str | None = None) -> RecordsExport:
        """Every live raw record (keys Connect ignores included), in log order per Kafka partition.

        ``store``: ``effective`` (default) takes a connector with its own offsets topic from that topic,
        as Connect reads it, and every other connector from the worker's log; ``worker`` the worker's log
        alone; ``connector`` the connectors' own topics alone (every named connector must have one).
        """
        self._checks.ensure_ready()
        which = checked_store(store)
        wanted = set(connectors or [])
        own = self._own_stores(wanted, which)
        records: list[ExportedRecord] = []
        skipped_null_keys = masked = 0
        if which != "connector":
            for key, entry in self._view.raw_entries():
                if key is None:
                    skipped_null_keys += 1
                    continue
                name = connector_of(key)
                if wanted and name not in wanted:
                    continue
                if name in own:
                    masked += 1
                    continue
                records.append(_exported(key, entry, name, None))
        for name, topic_store in own.items():
            for key, entry in topic_store.view.raw_entries():
                if key is not None and connector_of(key) == name:
                    records.append(_exported(key, entry, name, topic_store.topic))
        return {
            "source": self._log_description,
            "records": _in_log_order(records),
            "skipped_null_keys": skipped_null_keys,
            "store": which,
            "masked_worker_records": masked,
        }

    def _own_stores(self, wanted: set[str], which: str) -> dict[str, TopicStore]:
        """The connectors exported from their own offsets topic, with that topic's store."""
        if which == "worker" or self._stores is None:
            if which == "connector":
                raise InvalidRequest("store=connector: this daemon has no connector-specific offsets stores")
            return {}
        found: dict[str, TopicStore] = {}
        for name in sorted(wanted or self._stores.separate_topic_connectors()):
            topic_store = self._stores.records_store(name, which)
            if topic_store is not None:
                found[name] = topic_store
            elif which == "connector":
                raise InvalidRequest(
                    f"store=connector: connector {name}'s offsets are in the worker's log alone; use store=worker"
                )
        return found

    async def import_records(
        self,
        records: list[RawRecord],
        *,
        dry_run: bool = False,
        allow_malformed: bool = False,
        write_all: bool = False,
    ) -> ImportResult:
        """Write raw records as-is (no re-encoding) and answer the diff against the live view.

        Connect's rules still hold: every key must be a Connect offsets key unless
        ``allow_malformed`` (a record no task can read is almost always a mistake), and every
        connector touched must be STOPPED. Records that change nothing are not written unless
        ``write_all``, so re-running an import is a no-op. The diff and the checks are made under
        the write lock, so that no other write can change what they saw, and after the log (and the
        connectors' own topics) was read to its end, as a reset and a rollback do: from a view a moment
        behind another writer's acknowledged write (a second daemon, a Connect task), a record equal to
        what the view still held was left out as "changing nothing", and that write stayed in place.
        """
        self._checks.ensure_ready()
        await self._checks.refresh_within(self._writer.deadline())
        keys = KeyIndex()

        def screened() -> tuple[list[bytes], dict[int, ValueProblem], set[str]]:
            """Keys Connect would ignore, values it cannot read, the connectors named. An import holds up
            to ~280,000 records (--max-body-bytes): every pass over a bulk of them runs on a worker
            thread, or it would hold every other request on the event loop for seconds."""
            names = [keys.connector(r.key) for r in records]
            malformed = [r.key for r, name in zip(records, names, strict=True) if name is None]
            # The value under a key Connect ignores is never read, so not judged (docs/transfers.md).
            problems = {i: p for i, p in unreadable_values(records).items() if names[i] is not None}
            return malformed, problems, {name for name in names if name is not None}

        malformed, problems, named = await bulk_pass(len(records), screened)
        if malformed and not allow_malformed:
            first = _shown(malformed[0])
            raise InvalidRequest(
                f'{len(malformed)} record key(s) are not Connect offsets keys ["<connector>",{{…}}] '
                f"(first: {first}); Connect would ignore them. Pass allow_malformed=true to import them as-is"
            )
        if problems and not allow_malformed:
            raise InvalidRequest(
                unreadable_message(records, problems, ". Pass allow_malformed=true to import them as-is")
            )
        unreadable_keys = {records[i].key for i in problems}
        await self._read_to_end(named, self._writer.deadline())
        # The sections of the connectors the records name (their writes wait; others go on): the diff
        # reads their live offsets and the write must land before any other write of theirs.
        async with self._writer.sections(named) as section:

            def planned() -> tuple[Diff, list[str], list[RawRecord]]:
                diff = compute_diff(self._live_value_of(keys), records, keys)
                to_write = diff.records_to_write(write_all)
                for record in to_write:  # a dry run refuses what the write would
                    self._writer.check_size(record.key, record.value)
                return diff, diff.connectors(), to_write

            diff, touched, to_write = await bulk_pass(len(records), planned)
            # The diff's connectors come from the same key index as ``named``: a key outside the
            # sections taken would be written without its connector's section.
            assert named.issuperset(touched), sorted(set(touched) - named)[:3]
            # Every claim lookup within one --write-timeout (a Kafka claims topic read to its end): given
            # none, each waited the claims store's own 30 s, one connector after another, in a stall.
            checking = self._writer.deadline()
            for connector in touched:
                if not self._checks.is_stopped(connector):
                    raise NotStopped(not_stopped_message(connector))
                await check_writer_within(self._guard, checking, connector, NO_AUTH)
            if not dry_run and to_write:
                with write_origin("import", touched[0] if len(touched) == 1 else None):
                    await self._write_locked(to_write, keys, section)

        # The last record per key is the one written: count those whose value is unreadable, and the
        # values under keys in bytes no converter writes (listed by Connect, read by no task).
        def counted() -> tuple[int, int]:
            unreadable = sum(1 for r in to_write if r.key in unreadable_keys and value_problem(r.value) is not None)
            unread = sum(
                1
                for r in to_write
                if r.value is not None and keys.connector(r.key) is not None and key_form(r.key) is KeyForm.FOREIGN
            )
            return unreadable, unread

        kept, unread = await bulk_pass(len(to_write), counted)
        return ImportResult(diff, 0 if dry_run else len(to_write), dry_run, kept, unread)

    def _live_value_of(self, keys: KeyIndex) -> Callable[[bytes], bytes | None]:
        """A key's live value where Connect reads it: a connector's own store when it has one."""

        def live(key: bytes) -> bytes | None:
            name = keys.connector(key)
            if self._stores is not None and self._special(name):
                assert name is not None
                return self._stores.primary_value(name, key)
            return self._live_value(key)

        return live

    async def _write_locked(self, to_write: list[RawRecord], keys: KeyIndex, section: ImportSection) -> None:
        """The worker's log for most records; a connector with a combined store (KIP-618) gets its records
        written as Connect's ``set`` writes them: both topics, in order, task 0's transaction if exactly-once.
        Each write within its own deadline (``ImportSection``)."""
        special, plain = await bulk_pass(len(to_write), lambda: self._by_store(to_write, keys))
        if plain:
            await section.append(plain)
        for name, entries in special.items():
            assert self._stores is not None
            await self._stores.write_planned_locked(name, self._stores.plan_raw(name, entries), section)

    def _by_store(
        self, to_write: list[RawRecord], keys: KeyIndex
    ) -> tuple[dict[str, list[tuple[bytes, bytes | None]]], list[tuple[bytes, bytes | None]]]:
        """The records of connectors with a combined store (KIP-618), per connector, and all others."""
        special: dict[str, list[tuple[bytes, bytes | None]]] = {}
        plain: list[tuple[bytes, bytes | None]] = []
        for record in to_write:
            name = keys.connector(record.key)
            if self._special(name):
                assert name is not None
                special.setdefault(name, []).append((record.key, record.value))
            else:
                plain.append((record.key, record.value))
        return special, plain

    async def rollback(
        self,
        archive: HistoryArchive,
        connector: str,
        at_ms: int,
        dry_run: bool,
        allow_damaged: bool = False,
        epoch: int | None = None,
    ) -> RollbackResult:
        """Write back, under the exact raw keys, the connector's state at ``at_ms`` (see
        ``emulator.history.rollback``). The connector need not be live now: a rollback may bring
        back a connector that was reset since. ``epoch``: the state at ``at_ms`` in that epoch alone
        (``emulator.history.query.state_as_of``).

        A state rebuilt from a damaged archive (records of a damaged block were skipped) may be one
        that never existed: writing it is refused (``HistoryDamaged``) unless ``allow_damaged``; its
        dry run answers, and says so.

        The plan is made and written in the connector's write section (``OffsetsWriter.section``), so a
        PATCH or DELETE of the connector through this daemon lands wholly before the rollback (its write
        is in the state the plan is a diff against) or wholly after it (it waits for the section): planned
        outside it, a PATCH answered between plan and write was overwritten by a plan made without it, and
        a partition it added was not tombstoned. A dry run plans in the section too, as a write would.

        In the section, the log (and the connector's own topic) is first read to its end, within
        ``--write-timeout`` (503 ``log_timeout`` after it, or when the section is not had by then; nothing
        written), as a reset does: the plan is a diff against the current state, and from a view a moment
        behind another writer's acknowledged write (a second daemon on the topic, a Connect task, a
        producer) the diff left that write in place and answered "Nothing to roll back". Before the
        archive is read, too: the records the reader delivered are then queued to the archiver, and on the
        daemon that writes the archive its read waits for that queue (``HistoryArchive.sync``), so the
        state at ``at_ms`` and the current state come from the same records. The checks that follow the
        plan (Connect's config topic, the connector's claim) and the write then get a whole
        ``--write-timeout`` of their own, as an import's do: the archive read and the plan before them are
        the daemon's work, not a wait on the log."""
        self._checks.ensure_ready()
        deadline = self._writer.deadline()
        async with self._writer.section(connector, deadline) as section:
            await self._read_to_end((connector,), deadline)
            special = self._stores is not None and self._special(connector)
            view = self._view
            if special:
                assert self._stores is not None
                archive = self._stores.own_archive(connector, "effective") or archive
                view = self._stores.primary_view(connector)
            past = await read_past(archive, connector, at_ms, epoch)
            if not past.known and not view.knows(connector):
                raise ConnectorNotFound(f"Connector {connector} not found")
            if past.synced is False:  # a past state missing a write of ours would undo it
                raise HistoryBehind(
                    f"Rolling back {connector} is refused for now: {past.warning()}; nothing was written"
                )
            if past.report.damaged and not dry_run and not allow_damaged:
                raise HistoryDamaged(
                    f"Rolling back {connector} to {format_time_ms(at_ms)} is refused: the history archive is "
                    f"damaged, so the state rebuilt for that time may be one that never existed. "
                    f"{past.report.damage_summary()} Nothing was written. Restore the damaged file(s) from a "
                    "backup (docs/operations.md, Backups) and roll back again, or set the offsets by hand with a "
                    "PATCH (this rollback's dry run lists the rebuilt state); allow_damaged=true writes the "
                    "rebuilt state anyway."
                )

            def planned() -> tuple[list[RollbackChange], list[RawRecord], dict[int, ValueProblem]]:
                changes = plan_rollback(past, current_state(view, connector))
                note_rollback_plan(changes)  # audited even if the write then fails or times out
                targets = [RawRecord(c.key, c.target) for c in changes]
                return changes, targets, unreadable_values(targets)

            # A connector may have 10,000 partitions: the plan and its check pass over all of them, off the loop.
            changes, targets, problems = await asyncio.to_thread(planned)
            checking = self._writer.deadline()  # the checks, then the write: a --write-timeout of their own
            await self._checks.refresh_within(checking)
            self._checks.ensure_ready()
            self._checks.require_stopped(connector)
            await check_writer_within(self._guard, checking, connector, NO_AUTH, takes_epoch=False)
            if problems:
                # A past value no task can read (a bad producer wrote it then) is not written back.
                raise InvalidRequest(
                    f"Rolling back {connector} would write {unreadable_message(targets, problems, indexed=False)}"
                )
            if not dry_run:
                section.deadline = checking
                with write_origin("rollback", connector):
                    await self._write_rollback(connector, changes, view, section)
        return RollbackResult(at_ms, changes, dry_run, past.report)

    async def _write_rollback(
        self, connector: str, changes: list[RollbackChange], view: OffsetView, section: WriteSection
    ) -> None:
        """The plan's records, in the section it was planned in."""
        if self._stores is not None and self._special(connector):
            plan = self._stores.plan_raw(connector, [(c.key, c.target) for c in changes])
            await self._stores.write_planned(connector, plan, section)
            return
        records = await bulk_pass(
            len(changes),
            lambda: [self._writer.planned(c.key, c.target, existing=view.get_raw(c.key) is not None) for c in changes],
        )
        await section.append(records, NO_AUTH)

    def _live_value(self, key: bytes) -> bytes | None:
        entry = self._view.get_raw(key)
        return None if entry is None else entry.value
