"""The helpers a pipeline test is written with: seed Connect's offsets, read them, wait for them.

``OffsetsKit`` talks to one running daemon (embedded, on a user's broker, or in a compose stack)
and reads like the test a user means::

    connector = kit.unique_name("orders-src")
    kit.seed(connector, [({"table": "orders"}, {"id": 41})])     # where the task will resume
    ...                                                           # run the pipeline
    kit.wait_for_offset(connector, {"table": "orders"}, {"id": 100}, timeout=30)
    kit.assert_offsets(connector, [({"table": "orders"}, {"id": 100})])

Seeding goes through the daemon's PATCH with ``create=true``: the daemon encodes new keys with
Jackson's rules in the order given and places them with murmur2, byte for byte as Connect's own
writer (docs/protocol.md §1, §3, §8), so a real task that starts afterwards resumes from the
seeded offset. Isolation between tests comes from unique connector names; the connectors a kit
named or seeded are reset when the kit is closed, and ``snapshot``/``restore`` put back a whole log.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeAlias

from emulator.client.errors import ApiError, ClientError, NotFoundError
from emulator.client.history import HistoryClient
from emulator.client.http import AsyncOffsetsClient
from emulator.testing import report, snapshots
from emulator.testing.shapes import (
    Entry,
    OffsetsInput,
    Partition,
    by_partition,
    canonical,
    entries,
    require_flat,
    shown,
)
from emulator.testing.snapshots import LogSnapshot

__all__ = ["OffsetsKit", "unique_name"]

Expected: TypeAlias = Mapping[str, Any] | Callable[[dict[str, Any]], bool] | None
"""An offset to wait for (``None``: the partition is absent), or a predicate over the current
offset, called only while the partition has one (so ``lambda o: o["position"] > 10`` is safe)."""

_HISTORY_SHOWN = 10


def unique_name(prefix: str = "connector", context: str = "") -> str:
    """``<prefix>-<context>-<8 hex>``: unique per call, and readable in a daemon's log. ``prefix`` and
    ``context`` (a test's name) keep letters, digits, ``.``, ``_`` and ``-`` (others become ``-``);
    ``context`` is shortened to 40 characters."""
    tag = re.sub(r"[^A-Za-z0-9._-]+", "-", context).strip("-")[:40]
    # The prefix too: "orders src/1" made a name the daemon refuses in a URL (an encoded '/').
    head = re.sub(r"[^A-Za-z0-9._-]+", "-", prefix).strip("-")
    return "-".join(part for part in (head, tag, uuid.uuid4().hex[:8]) if part)


class OffsetsKit:
    """Helpers over one daemon at ``url``. ``context`` (usually the test's name) goes into unique
    names. Close it (or use it as a context manager) to reset the connectors it named or seeded."""

    def __init__(self, url: str, *, context: str = "", timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.context = context
        self.client = HistoryClient(self.url, timeout_s=timeout_s)
        """The synchronous client: every KIP-875, history, claims and records route."""
        self._timeout_s = timeout_s
        self._touched: dict[str, str | None] = {}  # connector -> kind, in first-touched order
        self.refusals: dict[str, ClientError] = {}
        """Why each connector the last ``reset_touched`` (or ``close``) returned was not reset."""

    # ---- names and isolation -----------------------------------------------------------------

    def unique_name(self, prefix: str = "connector") -> str:
        """A connector name no other test uses; reset when this kit is closed."""
        name = unique_name(prefix, self.context)
        self._touched.setdefault(name, None)
        return name

    def reset(self, connector: str, *, kind: str | None = None, catch_up: bool = True) -> None:
        """Delete every offset of ``connector`` (Connect's DELETE); an unknown connector is fine.

        With a Connect cluster, Connect's DELETE answers 404 for a connector its config topic does
        not hold, though a test may have seeded it before creating it (``seed`` may): its records are
        then deleted by their exact keys, so nothing a test seeded stays behind in a shared topic for
        a later connector of that name to resume from.

        ``catch_up=False`` skips the daemon's read of its log to the end that comes first: only for a
        caller that has just had it read (``reset_touched`` reads once for all its connectors; each
        read is a round trip to the end of every partition of the log)."""
        try:
            if catch_up:  # Connect's DELETE resets what its store read to the end; the daemon's view may lag
                self._catch_up(kind)
            self.client.reset(connector, kind=kind)
        except NotFoundError:
            if kind != "sink":  # a sink's group cannot be seeded for a connector Connect does not know
                self._delete_records_of(connector)

    def _delete_records_of(self, connector: str) -> None:
        records = self.client.records([connector])
        if records:
            self.client.import_records([(key, None) for key in records])

    def reset_touched(self) -> list[str]:
        """Reset the connectors this kit named or seeded. Returns those that could not be reset
        (still running in a Connect cluster, claimed, refused by the daemon's scopes, or the daemon
        is gone), and keeps each one's error in ``refusals``: their unique names keep them apart,
        and a teardown must not hide the test's own failure behind this one."""
        refused: dict[str, ClientError] = {}
        caught_up = False
        if any(kind != "sink" for kind in self._touched.values()):
            try:  # one read of the log to its end serves every reset below
                self._catch_up()
                caught_up = True
            except ClientError:
                pass  # each reset reads for itself, and one that fails is named below
        for connector, kind in self._touched.items():
            try:
                self.reset(connector, kind=kind, catch_up=not caught_up)
            except ClientError as exc:
                refused[connector] = exc
        self._touched.clear()
        self.refusals = refused
        return list(refused)

    # ---- writing -----------------------------------------------------------------------------

    def seed(self, connector: str, offsets: OffsetsInput, *, kind: str | None = None) -> None:
        """Write offsets as Connect writes them, so a task started afterwards resumes there.

        ``offsets``: ``[(partition, offset), ...]``, Connect's entries, or its PATCH body; an offset
        of None deletes that partition. Give each partition's keys in the order the connector
        builds its map (docs/protocol.md §1.4). ``kind="sink"`` (Kafka only) commits a sink
        connector's consumer group instead. A source partition or offset holding a map or a list is
        a ``ValueError`` before anything is sent: Connect keeps only flat maps (``shapes.require_flat``).
        """
        if not isinstance(connector, str) or not connector.strip():
            raise ValueError(f"a connector name is a non-empty string, got {connector!r}")
        listed = entries(offsets)
        if kind != "sink":  # a sink's entries are Connect's SinkUtils shape, which the daemon checks as Connect does
            require_flat(listed)
        body = {"offsets": listed}
        before = dict(self._touched)
        if self._touched.get(connector) is None:  # unique_name() left the kind open: a sink's is its group
            self._touched[connector] = kind
        try:
            self.client.alter(connector, body, create=True, kind=kind)
        except ApiError as exc:
            # Refused (4xx): nothing was written, so the test's end has no more to reset than before (a
            # reset as this kind would fail too, and its note name the wrong cause). A 5xx may have
            # been applied: kept.
            if exc.status < 500:
                self._touched = before
            raise

    # ---- reading -----------------------------------------------------------------------------

    def offsets(self, connector: str, *, kind: str | None = None) -> list[Entry]:
        """Connect's GET: ``[{"partition": ..., "offset": ...}]``. Raises ``NotFoundError`` (404)
        for a connector the daemon does not know.

        Fresh: the daemon reads its log to the end first, so a commit the pipeline under test made
        straight to the offsets topic (as Connect does) and that the broker acknowledged is seen at
        once (without it an assertion right after such a commit met the daemon's view a moment
        behind). A sink's offsets are its consumer group's, read from the broker each time."""
        return self.client.offsets(connector, kind=kind, fresh=kind != "sink")

    def offset(self, connector: str, partition: Partition, *, kind: str | None = None) -> dict[str, Any] | None:
        """One partition's offset, None when the partition (or the connector) has none."""
        return self._current(connector, partition, kind)[0]

    def history(self, connector: str, partition: Partition | None = None, *, limit: int = 100) -> list[dict[str, Any]]:
        """The latest ``limit`` changes of the connector (or one partition), **oldest first**, as
        the history route describes them (``time``, ``origin``, ``operation``, ``offset``, ...).
        Empty when the daemon has archived nothing for it. The archive follows the log's reader,
        so a change shows up here a moment after it is visible in ``offsets``."""
        try:
            answer = self.client.history(connector, partition=partition, limit=limit)
        except NotFoundError as exc:
            if exc.kind == "history_disabled":
                raise
            return []
        return list(reversed(answer["changes"]))

    # ---- asserting ---------------------------------------------------------------------------

    def wait_for_offset(
        self,
        connector: str,
        partition: Partition,
        expected: Expected,
        timeout: float = 30.0,
        *,
        kind: str | None = None,
        poll_s: float = 0.05,
    ) -> dict[str, Any] | None:
        """Wait until the partition's offset equals ``expected`` (type-exact, as Connect compares)
        or ``expected(offset)`` is true (asked only while the partition has an offset); returns
        that offset. A connector the daemon does not know
        yet counts as having no offset. On timeout, raises ``AssertionError`` showing the last
        offset seen and the partition's recent history."""
        __tracebackhide__ = True  # pytest shows the test's line, not the kit's
        check = self._matcher(expected)
        deadline = time.monotonic() + timeout
        while True:
            current, note = self._current(connector, partition, kind)
            if check(current):
                return current
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(connector, partition, expected, timeout, current, note))
            time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.0)))

    def assert_offsets(
        self, connector: str, expected: OffsetsInput, *, exact: bool = True, kind: str | None = None
    ) -> None:
        """Assert the connector's offsets, with a per-partition diff when they differ.

        ``exact`` (default): no other partition may have an offset. An expected offset of None
        means that partition must be absent. A connector the daemon does not know has no offsets.
        """
        __tracebackhide__ = True
        listed = entries(expected)
        want = by_partition(listed)
        if len(want) != len(listed):  # the last one silently won: a contradiction the test never saw
            texts = [canonical(e["partition"]) for e in listed]
            twice = next(t for i, t in enumerate(texts) if t in texts[:i])
            raise ValueError(f"expected names partition {twice} more than once; name each partition once")
        unknown = ""
        try:
            have = by_partition(self.offsets(connector, kind=kind))
        except NotFoundError as exc:
            have, unknown = {}, f"\nthe daemon answered 404 for connector {connector!r}: {exc.message}"
        problem = report.offsets_diff(connector, want, have, exact)
        if problem is not None:
            raise AssertionError(problem + unknown + self._unlisted_note(connector, unknown))

    # ---- whole logs --------------------------------------------------------------------------

    def snapshot(self) -> LogSnapshot:
        """Every live record of the log, raw bytes (keep it, or ``save`` it to a file); as of every
        write acknowledged before the call, by anyone (``offsets`` says why)."""
        self._catch_up()
        return snapshots.take(self.client)

    def restore(self, snapshot: LogSnapshot) -> int:
        """Put the log's live records back to ``snapshot``; returns the records written. Records
        written since by anyone are seen first (``offsets`` says why), so they are undone too.

        Every connector is then as the snapshot has it, so none is left for the end of the test to
        reset: resetting the ones this kit seeded would delete what the restore just put back (the
        documented ``snapshot``/``restore`` fixture runs its restore before the kit's own teardown)."""
        self._catch_up()
        written = snapshots.restore(self.client, snapshot)
        self._touched.clear()
        return written

    # ---- clients and lifecycle ---------------------------------------------------------------

    def async_client(self) -> AsyncOffsetsClient:
        """An asyncio client for the same daemon: ``async with kit.async_client() as client: ...``
        (it belongs to the event loop that uses it, so the test opens and closes it there)."""
        return AsyncOffsetsClient(self.url, timeout_s=self._timeout_s)

    def close(self) -> list[str]:
        """Reset the connectors this kit touched, then close the client; returns those refused."""
        try:
            return self.reset_touched()
        finally:
            self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- internals ---------------------------------------------------------------------------

    def _catch_up(self, kind: str | None = None) -> None:
        """Have the daemon read its offsets log to the end (a fresh read): what it then shows or
        changes includes every write any client of the log had acknowledged. A sink's group has no log."""
        if kind != "sink":
            self.client.connectors(fresh=True)

    def _current(self, connector: str, partition: Partition, kind: str | None) -> tuple[dict[str, Any] | None, str]:
        """The partition's offset and, when it has none, why (for a failure message)."""
        try:
            rows = self.offsets(connector, kind=kind)
        except NotFoundError:
            return None, f"the daemon does not know connector {connector!r} (404)"
        row = by_partition(rows).get(canonical(dict(partition)))
        if row is None:
            return None, f"connector {connector!r} has no offset for this partition"
        offset: dict[str, Any] | None = row["offset"]
        return offset, "" if offset is not None else "listed with offset null (a value Connect cannot parse)"

    def _unlisted_note(self, connector: str, unknown: str) -> str:
        """Why a connector with records can be unknown: Connect lists only what its config topic holds."""
        if not unknown or not self.client.records([connector]):
            return ""
        return (
            "\n  its offsets are in the log, but the daemon follows a Connect cluster's config topic and, as "
            "Connect, lists only connectors that topic holds: assert once the connector exists in Connect, "
            "or read its raw records (kit.client.records([name]))"
        )

    @staticmethod
    def _matcher(expected: Expected) -> Callable[[dict[str, Any] | None], bool]:
        if callable(expected):
            predicate = expected
            return lambda offset: offset is not None and bool(predicate(offset))
        want = None if expected is None else canonical(dict(expected))
        return lambda offset: (None if offset is None else canonical(offset)) == want

    def _timeout_message(
        self,
        connector: str,
        partition: Partition,
        expected: Expected,
        timeout: float,
        current: dict[str, Any] | None,
        note: str,
    ) -> str:
        wanted = "satisfy the predicate" if callable(expected) else f"become {shown(expected)}"
        seen = shown(current) if current is not None else f"none ({note})"
        lines = [
            f"connector {connector!r} partition {shown(dict(partition))}: the offset did not {wanted} "
            f"within {timeout:g} s",
            f"  last seen: {seen}",
            *[f"  {hint}" for hint in report.equal_in_python_hints(_plain(expected), current)],
            f"recent history of this partition (oldest first, at most {_HISTORY_SHOWN}):",
        ]
        try:
            lines += report.history_lines(self.history(connector, partition, limit=_HISTORY_SHOWN))
        except ClientError as exc:
            lines.append(f"  (history unavailable: {exc})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"OffsetsKit({self.url!r})"


def _plain(expected: Expected) -> dict[str, Any] | None:
    """The offset waited for as a dict, None for a predicate (or for None)."""
    return None if expected is None or callable(expected) else dict(expected)
