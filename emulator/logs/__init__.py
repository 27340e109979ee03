"""Offset logs: where records live. One interface (``base.OffsetLog``), two backends."""
