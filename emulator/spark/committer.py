"""Publishing Spark progress to the daemon: idempotent, never backwards, and never unreadable.

Spark hands the same end offset over more than once (``reader.commit`` is repeated after a
restart, the listener sees replayed batches, an operator reruns ``spark-handoff``), and an old
checkpoint may be restarted after Connect moved on. So every commit reads the current offset first
and writes only partitions whose offset would move forward. The read-then-write is not atomic on the
daemon, so writers on one host (the source's driver-side worker, the listener in the driver, the
CLI) serialise it with an advisory file lock per daemon and connector.

Sink offsets (``?kind=sink``, consumer group ``connect-<name>``) go through ``OffsetsClient`` too,
after checking once that the daemon declares the parameter: an older daemon would silently ignore
an unknown query parameter and write the offsets as a source connector's. Commits may carry a
sequence, so the daemon itself drops a batch that was already published, and a claim's epoch
(``Auth.claim_epoch``, as ``connect-offsets alter --claim-epoch`` sends it), so a job that holds
the connector's claim can commit under it (docs/claims-and-sequences.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from emulator.client.credentials import Credentials
from emulator.client.errors import ApiError, ClientError
from emulator.client.http import Auth, OffsetsClient
from emulator.codec.readable import offset_problem

log = logging.getLogger(__name__)

Kind = Literal["source", "sink"]
Entry = tuple[dict[str, Any], dict[str, Any]]
Order = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], str | None]
"""``(current, new) -> reason not to write new, or None``: how a source's offsets are ordered."""


class SinkOffsetsUnsupported(Exception):
    """The daemon has no sink-offsets support (``?kind=sink`` on the offsets routes)."""


CLAIM_REFUSALS = ("claim_held", "fenced")
"""The daemon's kinds for a write refused because of the connector's claim (``emulator.model.claims``)."""


class ClaimRefused(ApiError):
    """A Spark commit the daemon refused because of the connector's claim; nothing was written.

    The daemon's message speaks in API terms (``write with claim_epoch=1``), which a Spark job cannot
    act on; this one adds what the job gave (``claim_epoch``, None for none) and the knob that passes
    an epoch where the commit came from (``via``: a source option, a ``CommitTarget`` argument), so
    the refusal says what to change instead of only that a write failed. Status and kind stay the
    daemon's, so callers that handle ``ApiError`` see what they did before."""

    def __init__(self, refused: ApiError, connector: str, claim_epoch: int | None, via: str) -> None:
        if claim_epoch is None:
            advice = (
                f"This commit to {connector} gave no claim epoch: if this job holds that claim, give its epoch "
                f"with {via}; otherwise the claim's holder commits, or releases it first"
            )
        else:
            advice = (
                f"This commit to {connector} gave claim epoch {claim_epoch} ({via}), which is not the connector's "
                f"current claim: give the epoch of the claim this job holds now (`connect-offsets claims {connector}` "
                f"shows the current one), or take a new claim (`connect-offsets claim {connector} --owner …`) and "
                "give its epoch"
            )
        super().__init__(refused.status, f"{refused.message.rstrip('. ')}. {advice}", refused.kind)
        self.connector = connector
        self.claim_epoch = claim_epoch


@contextlib.contextmanager
def claim_advice(connector: str, claim_epoch: int | None, via: str) -> Iterator[None]:
    """Turn a refusal for the connector's claim into ``ClaimRefused`` (see there); other errors pass."""
    try:
        yield
    except ApiError as exc:
        if exc.kind not in CLAIM_REFUSALS or isinstance(exc, ClaimRefused):
            raise
        raise ClaimRefused(exc, connector, claim_epoch, via) from exc


class UnreadableOffsets(ValueError):
    """An entry would be written as a record Connect's reader cannot read back (nothing is sent)."""


def check_entries(entries: Sequence[Entry]) -> None:
    """Raise ``UnreadableOffsets`` unless every partition and offset, as encoded, is one Connect's
    ``OffsetStorageReaderImpl`` reads back (``emulator.codec.readable``). Spark offsets are foreign
    data: a 30 MB string, a nested map or an integer beyond 64 bits would otherwise reach the daemon
    (which refuses it too) only after the batch was planned, or in a dry run not at all."""
    for partition, offset in entries:
        for what, mapping in (("partition", partition), ("offset", offset)):
            problem = offset_problem(mapping)
            if problem is not None:
                shown = json.dumps(partition, ensure_ascii=False, default=str)[:200]
                raise UnreadableOffsets(
                    f"the {what} for partition {shown} cannot be written: Connect could not read it back "
                    f"({problem.describe()})"
                )


@dataclass(slots=True)
class CommitOutcome:
    connector: str
    kind: Kind
    written: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """``{"partition", "offset", "current", "reason"}`` for every partition left as it was."""
    dry_run: bool = False

    def shortfall(self) -> str | None:
        """Why the connector does not hold what it was handed, or ``None`` when it does: nothing to
        write at all (the offset flattened to no partition), or a partition left behind for a reason
        other than holding this offset already (``unchanged``) or a later batch of the same commit
        sequence (the daemon's ``stale sequence`` drop)."""
        if not self.written and not self.skipped:
            return (
                f"nothing was written to {self.connector}: the offset has no partition to store (it flattened to none)"
            )
        for item in self.skipped:
            reason = str(item.get("reason", ""))
            if reason == "unchanged" or reason.startswith("stale sequence"):
                continue
            partition = json.dumps(item.get("partition"), ensure_ascii=False, default=str)[:200]
            return f"{self.connector} kept partition {partition} as it was: {reason}"
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "kind": self.kind,
            "dry_run": self.dry_run,
            "written": self.written,
            "skipped": self.skipped,
        }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_offset(current: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Equal as Connect compares them, type and all: Python's ``==`` calls ``1``, ``1.0`` and ``True``
    equal, which Connect holds as a Long, a Double and a Boolean, so ``{"flag": true}`` after
    ``{"flag": 1}`` was skipped as unchanged and the connector kept the Long."""
    return current.keys() == new.keys() and all(
        type(current[key]) is type(value) and current[key] == value for key, value in new.items()
    )


def backwards_reason(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Why writing ``new`` over ``current`` must not happen, or ``None`` if it moves forward.

    Equal offsets are skipped (idempotence). An offset moves backwards when any numeric field present
    in both is smaller than now. Fields that are not numbers cannot be ordered and do not block.
    """
    if current is None:
        return None
    if same_offset(current, new):
        return "unchanged"
    for key, value in new.items():
        old = current.get(key)
        if _number(value) and _number(old) and value < old:
            return f"would move backwards ({key} {old} -> {value})"
    return None


def _lock_path(url: str, connector: str, kind: str) -> str:
    digest = hashlib.sha256(f"{url.rstrip('/')}\0{kind}\0{connector}".encode()).hexdigest()[:24]
    directory = os.path.join(tempfile.gettempdir(), "connect-offsets-locks")
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"{digest}.lock")


_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@contextlib.contextmanager
def _exclusive(url: str, connector: str, kind: str) -> Iterator[None]:
    path = _lock_path(url, connector, kind)
    with _thread_locks_guard:
        in_process = _thread_locks.setdefault(path, threading.Lock())
    with in_process:
        try:
            import fcntl
        except ImportError:  # not POSIX: in-process exclusion only
            yield
            return
        with open(path, "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class DaemonOffsets:
    """The daemon's offsets routes for one URL, as this package needs them."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 30.0,
        credentials: Credentials | None = None,
        retry_for_s: float | None = None,
    ) -> None:
        self._client = OffsetsClient(
            url.rstrip("/"), timeout_s=timeout_s, credentials=credentials, retry_for_s=retry_for_s
        )
        self.url = self._client.url
        self._sink_checked = False

    @property
    def client(self) -> OffsetsClient:
        """The underlying client, for callers that answer its errors as the CLI does (``spark-handoff``)."""
        return self._client

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> DaemonOffsets:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- reads --------------------------------------------------------------------------------
    def offsets(self, connector: str, kind: Kind = "source") -> list[dict[str, Any]] | None:
        """The connector's ``[{"partition", "offset"}]``; ``None`` when the daemon does not know it."""
        try:
            if kind == "source":
                return self._client.offsets(connector)
            self.require_sink_support()
            return self._client.offsets(connector, kind="sink")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def records(self, connector: str) -> dict[bytes, bytes]:
        """The connector's live raw records (exact key and value bytes, as Connect wrote them)."""
        return self._client.records([connector])

    def find(self, connector: str, partition: dict[str, Any], kind: Kind = "source") -> dict[str, Any] | None:
        for row in self.offsets(connector, kind) or []:
            if row.get("partition") == partition:
                offset = row.get("offset")
                return offset if isinstance(offset, dict) else None
        return None

    # -- writes -------------------------------------------------------------------------------
    def commit(
        self,
        connector: str,
        entries: Sequence[Entry],
        kind: Kind = "source",
        dry_run: bool = False,
        sequence: tuple[str, int] | None = None,
        order: Order = backwards_reason,
        create: bool = True,
        claim_epoch: int | None = None,
    ) -> CommitOutcome:
        """Write the entries that move forward; skip the rest (``order``: ``backwards_reason`` unless
        the source knows better, e.g. Debezium's positions).

        ``sequence`` (descriptor, number), e.g. (the query's id, the batch id), lets the daemon
        drop a replayed or late commit too (reordering detection), even one from another process.
        ``create=False``: a connector the daemon does not know is not made (the daemon answers 404).
        ``claim_epoch``: write as the holder of the connector's claim with that epoch; the daemon
        refuses the write (nothing is written) if that is not the current claim, or if the connector is
        claimed and no epoch is given."""
        outcome = CommitOutcome(connector, kind, dry_run=dry_run)
        if not entries:
            return outcome
        if kind == "source":  # a sink's entries are consumer-group offsets, checked by the daemon's sink rules
            check_entries(entries)
        with _exclusive(self.url, connector, kind):
            rows = self.offsets(connector, kind)
            current = {_key(r["partition"]): r.get("offset") for r in rows or [] if isinstance(r, dict)}
            changes: list[dict[str, Any]] = []
            for partition, offset in entries:
                now = current.get(_key(partition))
                reason = order(now if isinstance(now, dict) else None, offset)
                if reason is None:
                    changes.append({"partition": partition, "offset": offset})
                else:
                    outcome.skipped.append({"partition": partition, "offset": offset, "current": now, "reason": reason})
            if changes and not dry_run:
                dropped = self._alter(
                    connector, changes, kind, create=rows is None and create, sequence=sequence, claim_epoch=claim_epoch
                )
                for item in dropped:
                    outcome.skipped.append({**item, "current": current.get(_key(item.get("partition")))})
                dropped_keys = {_key(item.get("partition")) for item in dropped}
                changes = [c for c in changes if _key(c["partition"]) not in dropped_keys]
            outcome.written = changes
        for change in outcome.written:
            log.info(
                "%s offset of %s %s -> %s%s",
                kind,
                connector,
                change["partition"],
                change["offset"],
                " (dry run)" if dry_run else "",
            )
        return outcome

    def _alter(
        self,
        connector: str,
        changes: list[dict[str, Any]],
        kind: Kind,
        create: bool,
        sequence: tuple[str, int] | None = None,
        claim_epoch: int | None = None,
    ) -> list[dict[str, Any]]:
        """PATCH through the daemon; returns the partitions it dropped as stale (sequence). The claim
        epoch and sequence go as ``Auth``, the client's one way of sending them (the CLI's too)."""
        source, number = sequence if sequence else (None, None)
        auth = Auth(claim_epoch=claim_epoch, sequence_source=source, sequence=number)
        if kind == "source":
            body = self._client.alter(connector, {"offsets": changes}, create=create, auth=auth)
            return list(body.get("dropped", []))
        self.require_sink_support()
        try:
            body = self._client.alter(connector, {"offsets": changes}, create=create, auth=auth, kind="sink")
            return list(body.get("dropped", []))
        except ApiError as exc:
            if exc.kind == "wrong_connector_type":
                raise SinkOffsetsUnsupported(f"the daemon at {self.url} refused sink offsets: {exc.message}") from exc
            raise

    # -- sink support -------------------------------------------------------------------------
    def require_sink_support(self) -> None:
        """Raise ``SinkOffsetsUnsupported`` unless the daemon's PATCH offsets route declares ``kind``."""
        if self._sink_checked:
            return
        try:
            spec = self._client.request("GET", "/openapi.json")
        except ClientError as exc:
            raise SinkOffsetsUnsupported(f"cannot read the daemon's API description at {self.url}: {exc}") from exc
        operation = spec.get("paths", {}).get("/connectors/{connector}/offsets", {}).get("patch", {})
        names = {p.get("name") for p in operation.get("parameters", []) if isinstance(p, dict)}
        if "kind" not in names:
            raise SinkOffsetsUnsupported(
                f"the daemon at {self.url} does not support sink offsets: its PATCH /connectors/{{connector}}/offsets "
                "has no 'kind' parameter (consumer-group offsets for sink connectors are not available there)"
            )
        self._sink_checked = True


def _key(partition: Any) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))
