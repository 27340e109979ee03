"""Parsing and validating request bodies: offset modifications, raw records, claims.

Connect deserializes the PATCH body into ``ConnectorOffsets`` with Jackson (unknown properties
fail: ``InvalidRequest``) and then validates each map with ``OffsetUtils.validateFormat`` inside
the worker (a ``DataException``: ``InvalidOffsetFormat``, which keeps Connect's status apart). We
keep both steps, and parse with key order preserved because a new partition is encoded in the
order the request gives. Every body is read within the limits Connect's Jackson enforces
(``emulator.codec.strict_json``): a body beyond them is one Connect would refuse, and an offset
beyond them one no task could read back.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.codec.key_forms import KeyForm, connect_key, key_form
from emulator.codec.keys import encode_key, read_back, read_back_id
from emulator.codec.readable import offset_problem
from emulator.codec.strict_json import JsonLimitExceeded, TooDeepHere, json_type, loads_strict
from emulator.codec.surrogates import printable
from emulator.codec.values import InvalidOffsets, encode_offset, validate_format
from emulator.formats.model import RawRecord
from emulator.model.errors import InvalidOffsetFormat, InvalidRequest
from emulator.service.bulk import abandonable

NO_OFFSETS_MESSAGE = "Partitions / offsets need to be provided for an alter offsets request"


@dataclass(frozen=True, slots=True)
class OffsetChange:
    """One partition to set (``offset`` a map) or delete (``offset is None``)."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None
    partition_id: str = field(init=False, compare=False)
    """The partition as Connect reads it back (``read_back_id``): found in the view, deduplicated and
    sequenced by it. Computed once here; for a partition holding a float it is a round trip."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "partition_id", read_back_id(self.partition))

    def encoded_offset(self) -> bytes | None:
        """The value Connect's PATCH writes: the offset as its converter reads it back (``read_back``;
        ``{"pos":-0.0}`` is written ``{"pos":0.0}``), encoded by Jackson's rules; ``None`` (a tombstone)
        for a deletion."""
        return encode_offset(None if self.offset is None else read_back(self.offset))

    def keys(self, connector: str, live: Sequence[bytes]) -> list[bytes]:
        """The keys to write this change under, given the partition's ``live`` keys (oldest first).

        A new partition: one key, in the body's key order (ours, docs/protocol.md §8) with the values
        as Connect's PATCH writes them (``read_back``: ``{"a":-0.0}`` as ``{"a":0.0}``, else Connect's
        GET, looking up what it read back, never finds it). An existing one: every live key, so the
        write reaches the bytes its task reads; and when every one of them is in bytes no converter
        writes (``KeyForm.FOREIGN``: spaces, ``007``, escapes), no task reads any of them, so an offset
        is also written under the key Connect's GET looks up, which Connect's own PATCH writes. A
        deletion needs no such key: a tombstone of any key drops the partition from Connect's listing.
        """
        if not live:
            return [encode_key(connector, read_back(self.partition))]
        keys = list(dict.fromkeys(live))
        if self.offset is not None and all(key_form(key) is KeyForm.FOREIGN for key in keys):
            connect = connect_key(keys[0]) or encode_key(connector, read_back(self.partition))
            keys.append(connect)
        return keys


def parse_alter_body(raw: bytes) -> list[OffsetChange]:
    """Parse a KIP-875 ``{"offsets":[{"partition":…,"offset":…}]}`` body.

    Duplicate partitions keep the last occurrence, as ``ConnectorOffsets.toMap()`` does.
    """
    body = load_json(raw, "Request body")
    if body is None:
        raise InvalidRequest(NO_OFFSETS_MESSAGE)
    if not isinstance(body, dict):
        raise InvalidRequest(f"Request body must be a JSON object with an 'offsets' array, got {json_type(body)}")
    unknown = sorted(set(body) - {"offsets"})
    if unknown:
        raise InvalidRequest(f"Unrecognized field(s) {unknown} in the request body; expected only 'offsets'")
    offsets = body.get("offsets")
    if offsets is None or offsets == []:
        raise InvalidRequest(NO_OFFSETS_MESSAGE)
    if not isinstance(offsets, list):
        raise InvalidRequest('\'offsets\' must be an array of {"partition":…, "offset":…} objects')
    changes: dict[str, OffsetChange] = {}
    for index, item in enumerate(abandonable(offsets)):
        change = _parse_item(index, item)
        changes.pop(change.partition_id, None)
        changes[change.partition_id] = change
    return list(changes.values())


def load_json(raw: bytes | str, what: str) -> Any:
    """A JSON body or parameter (``None`` when empty), within Jackson's read limits; 400 otherwise."""
    if not raw.strip():
        return None
    try:
        return loads_strict(raw)
    except JsonLimitExceeded as exc:
        raise InvalidRequest(f"{what} exceeds a limit of Connect's JSON reader (Jackson): {exc}") from exc
    except TooDeepHere as exc:
        raise InvalidRequest(f"{what} is {exc}") from exc
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        raise InvalidRequest(f"{what} is not valid JSON: {exc}") from exc


def _parse_item(index: int, item: object) -> OffsetChange:
    if not isinstance(item, dict):
        raise InvalidRequest(f"offsets[{index}] must be an object with 'partition' and 'offset'")
    unknown = sorted(set(item) - {"partition", "offset"})
    if unknown:
        raise InvalidRequest(f"Unrecognized field(s) {unknown} in offsets[{index}]; expected 'partition' and 'offset'")
    partition = item.get("partition")
    offset = item.get("offset")
    if partition is None:
        # Connect would write a key ["<name>",null] that no task can ever read; refuse instead.
        raise InvalidRequest(f"offsets[{index}].partition must be provided (a JSON object)")
    if not isinstance(partition, dict):
        raise InvalidRequest(f"offsets[{index}].partition must be a JSON object, got {json_type(partition)}")
    if offset is not None and not isinstance(offset, dict):
        raise InvalidRequest(f"offsets[{index}].offset must be a JSON object or null, got {json_type(offset)}")
    return OffsetChange(partition, offset)


def validate_changes(changes: list[OffsetChange]) -> None:
    """``OffsetUtils.validateFormat`` on every map (Connect's ``DataException``), then the rule of every
    write path: each partition and offset, as encoded, must be one Connect's reader reads back
    (``emulator.codec.readable``; 400, and nothing of the request is written)."""
    for change in abandonable(changes):  # a request's deadline stops a pass over 200,000 of them
        try:
            validate_format(change.partition)
            validate_format(change.offset)
        except InvalidOffsets as exc:
            raise InvalidOffsetFormat(str(exc)) from exc
    for change in abandonable(changes):
        for what, mapping in (("partition", change.partition), ("offset", change.offset)):
            problem = offset_problem(mapping)
            if problem is not None:
                shown = json.dumps(change.partition, ensure_ascii=False)
                shown = shown if len(shown) <= 200 else shown[:200] + "…"
                raise InvalidRequest(
                    f"The {what} of partition {shown} would be written as a record Connect cannot read back "
                    f"({problem.describe()}); nothing was written"
                )


def parse_records_body(raw: bytes) -> list[RawRecord]:
    """``POST /offsets/records``: ``{"records": [{"key": <base64>, "value": <base64 or null>}]}``."""
    body = load_json(raw, "Request body")
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise InvalidRequest('Request body must be {"records": [{"key": <base64>, "value": <base64 or null>}, …]}')
    unknown = sorted(set(body) - {"records"})
    if unknown:
        raise InvalidRequest(f"Unrecognized field(s) {unknown} in the request body; expected only 'records'")
    records: list[RawRecord] = []
    for index, item in enumerate(body["records"]):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise InvalidRequest(f"records[{index}] must be an object with a base64 'key'")
        value = item.get("value")
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f"records[{index}].value must be a base64 string or null")
        try:
            key_bytes = base64.b64decode(item["key"], validate=True)
            value_bytes = None if value is None else base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidRequest(f"records[{index}] is not valid base64: {exc}") from exc
        records.append(RawRecord(key_bytes, value_bytes))
    return records


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    owner: str
    force: bool


def parse_claim_body(raw: bytes) -> ClaimRequest:
    """``POST /connectors/{c}/claim``: ``{"owner": "<who writes>", "force": false}``."""
    body = load_json(raw, "Request body")
    form = '{"owner": "<who writes>", "force": false}'
    if not isinstance(body, dict):
        got = json_type(body) if raw.strip() else "no body"
        raise InvalidRequest(f"A claim body is a JSON object, {form}; got {got}")
    unknown = sorted(set(body) - {"owner", "force"})
    if unknown:  # as a PATCH refuses them: a mistyped "froce": true would claim without force, unsaid
        raise InvalidRequest(f"Unrecognized field(s) {unknown} in the request body; expected only 'owner' and 'force'")
    if "owner" not in body:
        raise InvalidRequest(f"A claim needs 'owner' (who writes: the Spark query id, or the operator's name): {form}")
    if not isinstance(body["owner"], str):
        raise InvalidRequest(f"'owner' must be a string, got {json_type(body['owner'])}: {form}")
    if printable(body["owner"]) != body["owner"]:  # ours, not Connect's data: it need not hold what UTF-8 cannot
        raise InvalidRequest(
            f"'owner' holds half a UTF-16 surrogate pair ({printable(body['owner'])}): give a text UTF-8 can carry"
        )
    force = body.get("force", False)
    if not isinstance(force, bool):
        raise InvalidRequest("'force' must be true or false")
    return ClaimRequest(body["owner"], force)
