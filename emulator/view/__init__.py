"""The materialized view of the offsets log (raw key bytes to latest value, per-connector index)."""

from emulator.view.offset_view import Entry, OffsetRow, OffsetView, ViewStats

__all__ = ["Entry", "OffsetRow", "OffsetView", "ViewStats"]
