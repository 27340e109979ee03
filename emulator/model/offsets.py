"""Connect's ``ConnectorOffset``: one row of a connector's offsets, as every layer hands it on.

The view (live offsets), the history (past offsets), the sink strategy (a consumer group's
committed offsets) and the API all produce or pass on this shape, so it is declared once.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ConnectorOffset(TypedDict):
    """``{"partition": {...}, "offset": {...}}``; ``offset`` is None where the stored value is
    unreadable (Connect would leave the row out; we show it)."""

    partition: dict[str, Any]
    offset: Any
