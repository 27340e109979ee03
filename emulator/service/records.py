"""Raw offsets records through the daemon: byte-exact export and import, and history rollbacks.

KIP-875 bodies carry parsed JSON, so they cannot move a key whose bytes differ from Jackson's
canonical form, or a key Connect ignores; backups, restores, migrations and rollbacks need the
bytes themselves. Every write here follows the same rules as PATCH: the log read to its end and
the config topic refreshed, STOPPED connectors only, no unpresented claim, read-your-writes; and
no value Connect's reader cannot read back (``emulator.codec.readable``) unless the caller says
``allow_malformed``, in which case the answer counts them.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypedDict

from emulator.codec.readable import ValueProblem, value_problem
from emulator.formats.diff import Diff, compute_diff
from emulator.formats.model import KeyIndex, RawRecord, connector_of
from emulator.history.archive import HistoryArchive
from emulator.history.files import Damage
from emulator.history.origins import write_origin
from emulator.history.rollback import RollbackChange, current_state, plan_rollback
from emulator.model.connectors import not_stopped_message
from emulator.model.errors import ConnectorNotFound, InvalidRequest, NotStopped
from emulator.service.checks import ConnectorChecks
from emulator.service.history import read_past
from emulator.service.write_guard import NO_AUTH, WriteGuard
from emulator.service.writer import OffsetsWriter
from emulator.view.offset_view import OffsetView


class ExportedRecord(TypedDict):
    """One live record of ``GET /offsets/records``: base64 key and value, and where it sits in the log."""

    key: str
    value: str
    connector: str | None
    kafka_partition: int
    offset: int
    timestamp_ms: int


class RecordsExport(TypedDict):
    source: str
    """The log's description, e.g. ``kafka://host:9092/connect-offsets``."""
    records: list[ExportedRecord]
    skipped_null_keys: int
    """Keyless records cannot be imported anywhere (a compacted topic refuses them), so they are counted."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    diff: Diff
    written: int
    dry_run: bool
    unreadable_values: int = 0
    """Records written (or, in a dry run, to be written) whose value Connect cannot read back;
    non-zero only with ``allow_malformed``."""


@dataclass(frozen=True, slots=True)
class RollbackResult:
    at_ms: int
    changes: list[RollbackChange]
    dry_run: bool
    damaged_files: list[Damage]
    """Archive files that could not be read completely; the target state may lack their records."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _shown(raw: bytes) -> str:
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


class RecordsService:
    def __init__(
        self,
        log_description: str,
        view: OffsetView,
        checks: ConnectorChecks,
        guard: WriteGuard,
        writer: OffsetsWriter,
        refusal: Callable[[str], str | None] | None = None,
    ) -> None:
        """``refusal(connector)``: why raw writes must not touch a connector (KIP-618 connectors), or None."""
        self._log_description = log_description
        self._view = view
        self._checks = checks
        self._guard = guard
        self._writer = writer
        self._refusal = refusal

    def _refuse(self, connectors: Iterable[str | None]) -> None:
        for connector in connectors:
            why = None if self._refusal is None or connector is None else self._refusal(connector)
            if why is not None:
                raise InvalidRequest(why)

    def export(self, connectors: list[str] | None = None) -> RecordsExport:
        """Every live raw record (keys Connect ignores included), in log order per Kafka partition."""
        self._checks.ensure_ready()
        wanted = set(connectors or [])
        records: list[ExportedRecord] = []
        skipped_null_keys = 0
        for key, entry in self._view.raw_entries():
            if key is None:
                skipped_null_keys += 1
                continue
            name = connector_of(key)
            if wanted and name not in wanted:
                continue
            records.append(
                {
                    "key": _b64(key),
                    "value": _b64(entry.value),
                    "connector": name,
                    "kafka_partition": entry.partition,
                    "offset": entry.offset,
                    "timestamp_ms": entry.timestamp_ms,
                }
            )
        records.sort(key=lambda r: (r["kafka_partition"], r["offset"]))
        return {"source": self._log_description, "records": records, "skipped_null_keys": skipped_null_keys}

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
        the write lock, so that no other write can change what they saw.
        """
        self._checks.ensure_ready()
        await self._checks.refresh()
        keys = KeyIndex()
        malformed = [r.key for r in records if keys.connector(r.key) is None]
        if malformed and not allow_malformed:
            first = malformed[0][:200].decode("utf-8", "backslashreplace")
            raise InvalidRequest(
                f'{len(malformed)} record key(s) are not Connect offsets keys ["<connector>",{{…}}] '
                f"(first: {first}); Connect would ignore them. Pass allow_malformed=true to import them as-is"
            )
        problems = await asyncio.to_thread(unreadable_values, records)
        if problems and not allow_malformed:
            raise InvalidRequest(
                unreadable_message(records, problems, ". Pass allow_malformed=true to import them as-is")
            )
        self._refuse(dict.fromkeys(keys.connector(r.key) for r in records))
        unreadable_keys = {records[i].key for i in problems}
        async with self._writer.lock:
            diff = compute_diff(self._live_value, records, keys)
            for connector in diff.connectors():
                if not self._checks.is_stopped(connector):
                    raise NotStopped(not_stopped_message(connector))
                await self._guard.check_writer(connector, NO_AUTH)
            to_write = diff.records_to_write(write_all)
            if not dry_run and to_write:
                touched = diff.connectors()
                with write_origin("import", touched[0] if len(touched) == 1 else None):
                    await self._writer.append_locked([(r.key, r.value) for r in to_write])
        # The last record per key is the one written: count those whose value is unreadable.
        kept = sum(1 for r in to_write if r.key in unreadable_keys and value_problem(r.value) is not None)
        return ImportResult(diff, 0 if dry_run else len(to_write), dry_run, kept)

    async def rollback(self, archive: HistoryArchive, connector: str, at_ms: int, dry_run: bool) -> RollbackResult:
        """Write back, under the exact raw keys, the connector's state at ``at_ms`` (see
        ``emulator.history.rollback``). The connector need not be live now: a rollback may bring
        back a connector that was reset since."""
        self._checks.ensure_ready()
        self._refuse([connector])
        past = await read_past(archive, connector, at_ms)
        if not past.known and not self._view.knows(connector):
            raise ConnectorNotFound(f"Connector {connector} not found")
        changes = plan_rollback(past, current_state(self._view, connector))
        await self._checks.refresh()
        self._checks.ensure_ready()
        self._checks.require_stopped(connector)
        await self._guard.check_writer(connector, NO_AUTH)
        targets = [RawRecord(c.key, c.target) for c in changes]
        problems = unreadable_values(targets)
        if problems:
            # A past value no task can read (a bad producer wrote it then) is not written back.
            raise InvalidRequest(
                f"Rolling back {connector} would write {unreadable_message(targets, problems, indexed=False)}"
            )
        records = [
            self._writer.planned(c.key, c.target, existing=self._view.get_raw(c.key) is not None) for c in changes
        ]
        if not dry_run:
            with write_origin("rollback", connector):
                await self._writer.write(connector, records)
        return RollbackResult(at_ms, changes, dry_run, past.report.damaged)

    def _live_value(self, key: bytes) -> bytes | None:
        entry = self._view.get_raw(key)
        return None if entry is None else entry.value
