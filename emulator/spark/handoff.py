"""Publishing a query's last completed batch to the daemon: shared by the listener and ``spark-handoff``.

The checkpoint, not ``reader.commit`` (one batch late, never for the last batch) and not
``reader.stop`` (not called), is what says how far Spark got: ``offsets/N`` with ``commits/N``.
Publishing that batch's end offsets makes the connector resume exactly after Spark's output.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.spark.checkpoint import CheckpointError, CompletedBatch, parse_offset
from emulator.spark.committer import (
    CommitOutcome,
    DaemonOffsets,
    Entry,
    Kind,
    Order,
    UnreadableOffsets,
    backwards_reason,
    check_entries,
    claim_advice,
)
from emulator.spark.debezium_offsets import DebeziumOffset, debezium_backwards_reason
from emulator.spark.shapes import FileOffset, foreign_entries, kafka_entries, kafka_shaped

log = logging.getLogger(__name__)


class HandoffError(Exception):
    """The offsets cannot be published as asked (wrong source index, wrong shape)."""


@dataclass(frozen=True, slots=True)
class CommitTarget:
    """Where the progress of one source of a query goes.

    ``source_index`` is the source's position in the query (progress ``sources[i]``, checkpoint line
    ``i``). ``kind="source"`` stores it as a source connector's offsets; ``kind="sink"`` commits a
    Kafka-shaped offset to consumer group ``connect-<connector>`` (needs the daemon's sink support).
    ``query`` limits the target to queries with that name or id (``None``: the first query of the
    session that publishes to it; ``ListenerCommitter`` skips any other, with a WARNING).
    ``claim_epoch`` is the epoch of the job's claim on the connector (``connect-offsets claim``): a
    claimed connector refuses commits without its current epoch, so a job that holds the claim gives it.
    """

    source_index: int
    connector: str
    kind: Kind = "source"
    query: str | None = None
    claim_epoch: int | None = None

    def __post_init__(self) -> None:
        index: object = self.source_index
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(
                f"CommitTarget: source_index must be an int (the source's position in the query), "
                f"got {index!r} ({type(index).__name__})"
            )
        if index < 0:
            raise ValueError(f"CommitTarget: source_index must be 0 or more, got {index!r}")
        connector: object = self.connector
        if not isinstance(connector, str):
            raise TypeError(
                f"CommitTarget: connector must be a connector's name (str), got {connector!r} "
                f"({type(connector).__name__})"
            )
        if not connector.strip():
            raise ValueError(f"CommitTarget: connector must be a connector's name, got {connector!r}")
        if self.kind not in ("source", "sink"):
            raise ValueError(f"CommitTarget: kind must be 'source' or 'sink', got {self.kind!r}")
        query: object = self.query
        if query is not None and not isinstance(query, str):
            raise TypeError(
                f"CommitTarget: query must be a query's name or id (str) or None, got {query!r} "
                f"({type(query).__name__})"
            )
        if isinstance(query, str) and not query.strip():
            raise ValueError(f"CommitTarget: query must be a query's name or id or None, got {query!r}")
        check_claim_epoch("CommitTarget: claim_epoch", self.claim_epoch)

    def applies_to(self, name: str | None, query_id: str | None) -> bool:
        return self.query is None or self.query in (name, query_id)


def check_claim_epoch(what: str, epoch: object) -> None:
    """Refuse at once what no claim's epoch can be (a claim's epoch is an int from 0 up): the daemon
    would refuse it only at the first commit, a batch or a query's end later."""
    if epoch is None:
        return
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise TypeError(
            f"{what} must be a claim's epoch (int, from `connect-offsets claim`) or None, got {epoch!r} "
            f"({type(epoch).__name__})"
        )
    if epoch < 0:
        raise ValueError(f"{what} must be a claim's epoch (0 or more) or None, got {epoch!r}")


def own_entries(offset: Any) -> tuple[str, list[Entry], Order] | None:
    """(connector, Connect entries, how they are ordered) for a ``connect-file`` or
    ``connect-debezium`` offset, which name their connector; ``None`` for any other offset."""
    file = FileOffset.parse(offset)
    if file is not None:
        return file.connector, [file.connect_entry()], backwards_reason
    cdc = DebeziumOffset.parse(offset)
    if cdc is not None:
        return cdc.connector, cdc.connect_entries(), debezium_backwards_reason
    return None


def order_for(offset: Any) -> Order:
    own = own_entries(offset)
    return backwards_reason if own is None else own[2]


def entries_for(offset: Any, source_index: int, kind: Kind) -> tuple[str | None, list[Entry]]:
    """(connector named by the offset itself, Connect entries) for one parsed Spark offset; a
    ``HandoffError`` where an entry is one Connect could not read back (dry runs included)."""
    connector, entries = _entries(offset, source_index, kind)
    if kind == "source":
        try:
            check_entries(entries)
        except UnreadableOffsets as exc:
            raise HandoffError(f"source {source_index}'s offset: {exc}") from exc
    return connector, entries


def _entries(offset: Any, source_index: int, kind: Kind) -> tuple[str | None, list[Entry]]:
    own = own_entries(offset)
    if own is not None:
        if kind == "sink":
            raise HandoffError(
                "a connect-file or connect-debezium offset is a source connector's position, not a consumer group's"
            )
        return own[0], own[1]
    if kind == "sink":
        shaped = kafka_shaped(offset)
        if shaped is None:
            raise HandoffError(
                f"source {source_index}'s offset is not Kafka-shaped ({{topic: {{partition: offset}}}}); "
                f"it cannot be committed to a consumer group: {str(offset)[:200]}"
            )
        return None, kafka_entries(shaped)
    try:
        return None, foreign_entries(offset, source_index)
    except ValueError as exc:  # fields that flatten to one key: no Connect offset holds both
        raise HandoffError(f"source {source_index}'s offset: {exc}") from exc


def publish(
    daemon: DaemonOffsets,
    offsets: Mapping[str, Any],
    targets: Sequence[CommitTarget] = (),
    own_sources: bool = True,
    dry_run: bool = False,
    sequence: tuple[str, int] | None = None,
    claim_epochs: Mapping[str, int] | None = None,
) -> list[CommitOutcome]:
    """Commit parsed end offsets by source id: ``connect-file`` and ``connect-debezium`` sources to the
    connector their offset names (when ``own_sources``), other sources as ``targets`` say.
    ``sequence`` = (query id, batch id) makes the daemon drop a batch that was already published
    (reordering detection). ``claim_epochs`` = {connector: epoch}: commit to those connectors as the
    holder of that claim (a target's own ``claim_epoch`` comes first); a refusal for the claim is a
    ``ClaimRefused`` that names the argument to change."""
    epochs = dict(claim_epochs or {})
    indices = {int(source_id) for source_id in offsets if str(source_id).isdigit()}
    missing = [t for t in targets if t.source_index not in indices]
    if missing:  # publishing the rest and answering "done" would hide that this one never lands
        names = ", ".join(f"source {t.source_index} -> {t.connector}" for t in missing)
        raise HandoffError(
            f"no source with that index in this query ({names}); its sources are "
            f"{', '.join(str(i) for i in sorted(indices)) or 'none'}, in the order the query reads them"
        )
    outcomes: list[CommitOutcome] = []
    for source_id, raw in offsets.items():
        value = parse_offset(raw)
        if value is None:
            continue
        index = int(source_id) if str(source_id).isdigit() else -1
        matching = [t for t in targets if t.source_index == index]
        for target in matching:
            _, entries = entries_for(value, index, target.kind)
            order = order_for(value)
            epoch = target.claim_epoch if target.claim_epoch is not None else epochs.get(target.connector)
            with claim_advice(target.connector, epoch, f"CommitTarget({index}, {target.connector!r}, claim_epoch=N)"):
                outcomes.append(
                    daemon.commit(target.connector, entries, target.kind, dry_run, sequence, order, claim_epoch=epoch)
                )
        if not matching and own_sources:
            own = own_entries(value)
            if own is not None:
                connector, entries, order = own
                epoch = epochs.get(connector)
                with claim_advice(connector, epoch, f"the listener's claim_epochs={{{connector!r}: N}}"):
                    outcomes.append(
                        daemon.commit(connector, entries, "source", dry_run, sequence, order, claim_epoch=epoch)
                    )
    return outcomes


def publish_batch(
    daemon: DaemonOffsets,
    batch: CompletedBatch,
    targets: Sequence[CommitTarget] = (),
    own_sources: bool = True,
    dry_run: bool = False,
) -> list[CommitOutcome]:
    return publish(daemon, batch.sources, targets, own_sources, dry_run)


__all__ = [
    "CheckpointError",
    "CommitTarget",
    "HandoffError",
    "check_claim_epoch",
    "entries_for",
    "order_for",
    "own_entries",
    "publish",
    "publish_batch",
]
