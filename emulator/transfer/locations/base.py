"""What every location can do: describe itself, read every record, and apply records to itself.

Two kinds of destination behave differently on purpose: a *store* (an offsets topic, an embedded
log, a standalone file, a daemon) is updated, so records of other connectors stay; a *document*
(cdc, kip875, snapshot files) is replaced by an export, except the records of connectors a
``--connector`` filter leaves out, which stay.
"""

from __future__ import annotations

import abc

from emulator.formats.model import Loaded, RawRecord
from emulator.transfer.options import TransferContext
from emulator.transfer.report import ApplyResult


class Location(abc.ABC):
    kind: str
    store: bool = False
    """True for stores that a write updates (logs, standalone files, daemons); False for documents."""

    @property
    @abc.abstractmethod
    def description(self) -> str: ...

    @abc.abstractmethod
    def read(self, ctx: TransferContext) -> Loaded:
        """Every record, with the notes an operator should see."""

    @abc.abstractmethod
    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        """Plan (and unless dry run, write) ``incoming`` here; a store adds ``--prune``'s tombstones
        (``ctx.prune``) from the reading it plans against (``selection.with_tombstones``)."""

    def exists(self, ctx: TransferContext) -> bool:
        return True
