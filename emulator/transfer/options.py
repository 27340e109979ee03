"""What a transfer is asked to do (``TransferOptions``) and what its phases share (``TransferContext``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from emulator.formats.model import KeyIndex, RawRecord
from emulator.transfer.progress import Progress

Malformed = Literal["refuse", "skip", "keep"]
Store = Literal["effective", "connector", "worker"]


@dataclass(frozen=True)
class TransferOptions:
    connectors: frozenset[str] = frozenset()
    """Only records of these connectors (empty: all). Keys Connect ignores belong to no connector."""
    malformed: Malformed = "refuse"
    """Records whose keys Connect ignores or whose values Connect cannot read back: refuse the
    transfer, skip them, or copy them as-is (counted in the report)."""
    live_only: bool = False
    """Leave the source's tombstones out."""
    unwrap_envelopes: bool = False
    """Turn schema-envelope keys (Flink CDC, Debezium 1.x: ``{"schema":null,"payload":[…]}``) into
    Connect keys: the payload's exact bytes where the envelope is Jackson's."""
    prune: bool = False
    """Also delete destination records of the transferred connectors that the source lacks."""
    write_all: bool = False
    """Write records that change nothing too (default: only changes, so a re-run is a no-op)."""
    dry_run: bool = False
    partitions: int = 25
    """Partition count when a destination topic or embedded log has to be created."""
    replication_factor: int = -1
    kafka_config_from: dict[str, str] = field(default_factory=dict)
    kafka_config_to: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    """Connector (engine) name for bare CDC states or a bare KIP-875 body, which carry none."""
    risingwave: bool = False
    """CDC export: add RisingWave's ``"isHeartbeat":false``."""
    timeout_s: float = 300.0
    """Bound on reading a log to its end and on each write."""
    diff_limit: int | None = None
    """Entries listed per connector in the report's diff (counts are always complete); None: all."""
    store: Store | None = None
    """Which store a daemon source is read from (``GET /offsets/records?store=``): None is the daemon's
    default, ``effective`` (each connector as Connect reads it, from its own offsets topic when it has one)."""


@dataclass(slots=True)
class TransferContext:
    """Handed to every location call: the options, where progress goes, which side is being
    accessed (a Kafka location takes the ``from`` or ``to`` client settings), and one key index,
    so that each distinct key is parsed once for selection, pruning and the diff."""

    options: TransferOptions
    progress: Progress
    role: Literal["from", "to"] = "from"
    keys: KeyIndex = field(default_factory=KeyIndex)
    unreadable_keys: set[bytes] = field(default_factory=set)
    """Keys whose incoming value Connect cannot read back (kept by ``--malformed keep``): a
    destination counts how many of them it writes."""

    prune: set[str] | None = None
    """``--prune``: the connectors whose destination records the source lacks are deleted. The
    destination adds their tombstones itself (``selection.with_tombstones``), from the same reading it
    plans against: asked beforehand, it read itself a second time (a whole log, or a file) for them."""
    pruned: int = 0
    """How many tombstones ``--prune`` added (the report counts them among the records offered)."""

    writing: bool = False
    """Set by a destination just before it sends or writes the first thing that changes it: a Ctrl-C
    before then changed nothing (``pipeline.transfer`` says so)."""

    def count_unreadable(self, written: Iterable[RawRecord]) -> int:
        """How many of ``written`` carry a value Connect cannot read back."""
        if not self.unreadable_keys:
            return 0
        return sum(1 for r in written if r.key in self.unreadable_keys and r.value is not None)

    @property
    def kafka_config(self) -> dict[str, str]:
        return self.options.kafka_config_from if self.role == "from" else self.options.kafka_config_to
