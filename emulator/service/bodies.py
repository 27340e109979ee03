"""Parsing and validating the bodies of offset-modification requests.

Connect deserializes the PATCH body into ``ConnectorOffsets`` with Jackson (unknown properties
fail, which is a 400) and then validates each map with ``OffsetUtils.validateFormat`` inside the
worker (a ``DataException``, which its exception mapper turns into a 500). We keep both steps and
their status codes, and parse with key order preserved because a new partition is encoded in the
order the request gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from emulator.codec.keys import logical_id
from emulator.codec.values import InvalidOffsets, validate_format
from emulator.model.errors import BadRequest, EmulatorError

NO_OFFSETS_MESSAGE = "Partitions / offsets need to be provided for an alter offsets request"


@dataclass(frozen=True, slots=True)
class OffsetChange:
    """One partition to set (``offset`` a map) or delete (``offset is None``)."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None


def parse_alter_body(raw: bytes) -> list[OffsetChange]:
    """Parse a KIP-875 ``{"offsets":[{"partition":…,"offset":…}]}`` body.

    Duplicate partitions keep the last occurrence, as ``ConnectorOffsets.toMap()`` does.
    """
    try:
        body = json.loads(raw, parse_constant=_reject_constant) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from exc
    if body is None:
        raise BadRequest(NO_OFFSETS_MESSAGE)
    if not isinstance(body, dict):
        raise BadRequest(f"Request body must be a JSON object with an 'offsets' array, got {type(body).__name__}")
    unknown = sorted(set(body) - {"offsets"})
    if unknown:
        raise BadRequest(f"Unrecognized field(s) {unknown} in the request body; expected only 'offsets'")
    offsets = body.get("offsets")
    if offsets is None or offsets == []:
        raise BadRequest(NO_OFFSETS_MESSAGE)
    if not isinstance(offsets, list):
        raise BadRequest('\'offsets\' must be an array of {"partition":…, "offset":…} objects')
    changes: dict[str, OffsetChange] = {}
    for index, item in enumerate(offsets):
        change = _parse_item(index, item)
        lid = logical_id(change.partition)
        changes.pop(lid, None)
        changes[lid] = change
    return list(changes.values())


def _reject_constant(name: str) -> Any:
    # Jackson (Connect's REST mapper) rejects NaN/Infinity literals; Python's json would accept them.
    raise ValueError(f"Non-standard token '{name}': NaN and Infinity are not valid JSON numbers")


def _parse_item(index: int, item: object) -> OffsetChange:
    if not isinstance(item, dict):
        raise BadRequest(f"offsets[{index}] must be an object with 'partition' and 'offset'")
    unknown = sorted(set(item) - {"partition", "offset"})
    if unknown:
        raise BadRequest(f"Unrecognized field(s) {unknown} in offsets[{index}]; expected 'partition' and 'offset'")
    partition = item.get("partition")
    offset = item.get("offset")
    if partition is None:
        # Connect would write a key ["<name>",null] that no task can ever read; refuse instead.
        raise BadRequest(f"offsets[{index}].partition must be provided (a JSON object)")
    if not isinstance(partition, dict):
        raise BadRequest(f"offsets[{index}].partition must be a JSON object, got {type(partition).__name__}")
    if offset is not None and not isinstance(offset, dict):
        raise BadRequest(f"offsets[{index}].offset must be a JSON object or null, got {type(offset).__name__}")
    return OffsetChange(partition, offset)


def validate_changes(changes: list[OffsetChange]) -> None:
    """``OffsetUtils.validateFormat`` on every map; Connect answers its ``DataException`` with 500."""
    for change in changes:
        try:
            validate_format(change.partition)
            validate_format(change.offset)
        except InvalidOffsets as exc:
            raise EmulatorError(str(exc), status=500) from exc
