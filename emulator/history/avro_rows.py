"""Archive rows encoded straight to Avro binary, and written as blocks of a standard container file.

fastavro's ``Writer.write`` resolves every union of the row (11 of its 17 fields are nullable) and
looks every field up in a dict: about 10 µs per row here, most of a restore's CPU when history is on
(``benchmarks/RESULTS.md``, restore). Yet within one log almost everything of a row repeats: the
log and epoch never change, the origin of a replayed record is always ``external``, and a key's
connector, partition text and problem are the same on every record of that key. So a row is built
from cached, already encoded pieces plus four varints and the key and value bytes, and its
checksum (``schema.content_crc``, unchanged) is carried along piece by piece.

The bytes are exactly what fastavro writes for the same row with ``schemas/history-record.avsc``
(a unit test compares them), and the file is a standard Avro container: fastavro writes its header,
the blocks here are ``count, size, data, sync`` with the file's codec, so every reader (ours, Spark,
Java's ``DataFileReader``) reads it as before.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import IO

from emulator.codec.jackson_writer import at_any_depth
from emulator.codec.keys import KeyProblem, parse_key
from emulator.codec.surrogates import escape_in_json, printable
from emulator.history.origins import EXTERNAL_ORIGIN, Origin, OriginRegistry
from emulator.model.records import LogRecord

_KEY_CACHE_BYTES = 32 * 1024 * 1024
"""Budget of the keys' encoded pieces kept (the replay of a log meets the same keys again and
again). Counted in bytes, not keys: at 200,000 keys the pieces held ~100 MB, a third of what a
daemon with a million live keys needs for everything else (benchmarks/daemon_memory.py)."""
_KEY_ENTRY_OVERHEAD = 250
"""Per cached key beyond the pieces' lengths: three bytes headers, a tuple and a dict slot."""
_SEEN_BITS = 1 << 24
"""A key is cached from its second sighting on: a replay that writes each key once (a large
connector's first snapshot) would otherwise fill the cache with keys never met again, and their
entries, scattered among the replay's short-lived records, kept ~34 MB of a million-key daemon
resident (benchmarks/RESULTS.md, round 8). Sightings are three bits of a 2 MiB filter per key
(~0.5% false "seen before" at a million keys), cleared with the cache."""
_SEEN_MASK = _SEEN_BITS - 1
_PARTITION_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
"""CPython's C encoder, built once: ``JSONEncoder.encode`` builds one per call (most of its cost)."""


def _partition_text(partition: dict[str, object]) -> str:
    """``json.dumps(partition, ensure_ascii=False, separators=(",", ":"), allow_nan=True)``."""
    if _ENCODE_ONE is None:  # another interpreter: the same text, the slower way
        return _PARTITION_JSON(partition)
    return "".join(_ENCODE_ONE(partition, 0))


def _unencodable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODE_ONE = (
    _C_ENCODER(None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    if _C_ENCODER is not None
    else None
)
_NULL = b"\x00"
_SOME = b"\x02"  # union branch 1 (the non-null type), as a zigzag long


def encode_long(n: int) -> bytes:
    """Avro ``long``/``int``: zigzag, then a little-endian base-128 varint (unrolled up to 5 bytes:
    partitions, offsets and checksums; a loop only for timestamps and larger)."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _SMALL[z]
    if z < 0x4000:
        return bytes((z & 0x7F | 0x80, z >> 7))
    if z < 0x200000:
        return bytes((z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, z >> 14))
    if z < 0x10000000:
        return bytes((z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, (z >> 14) & 0x7F | 0x80, z >> 21))
    if z < 0x800000000:
        return bytes(
            (z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, (z >> 14) & 0x7F | 0x80, (z >> 21) & 0x7F | 0x80, z >> 28)
        )
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [bytes([z]) for z in range(0x80)]


def _string(text: str) -> bytes:
    data = text.encode()  # every text here is valid: names through ``printable``, JSON through ``escape_in_json``
    return encode_long(len(data)) + data


def _optional_string(text: str | None) -> bytes:
    return _NULL if text is None else _SOME + _string(text)


class _OriginParts:
    """An origin's encoded fields (origin ... remote) and its two pieces of the checksum's text."""

    __slots__ = ("avro", "crc_middle", "crc_tail")

    def __init__(self, origin: Origin) -> None:
        operation = origin.operation
        if origin.uncertain and operation is not None:
            operation += " (unacknowledged)"
        # a name from a request's path can hold a lone surrogate: stored as an escape, valid UTF-8
        connector, principal, remote = (
            None if text is None else printable(text) for text in (origin.connector, origin.principal, origin.remote)
        )
        self.avro = (
            _string(origin.origin)
            + _optional_string(operation)
            + _optional_string(connector)
            + _optional_string(principal)
            + _optional_string(remote)
        )
        self.crc_middle = f"{origin.origin}\x1f{operation}\x1f{connector}\x1f".encode()
        self.crc_tail = f"\x1e{principal}\x1f{remote}".encode() if principal is not None or remote is not None else b""


def key_fields(key: bytes | None) -> tuple[str | None, str | None, str | None]:
    """``(connector, partition as JSON text, key problem)`` of a raw key, as archived."""
    if key is None:
        return None, None, KeyProblem.NULL_KEY.value
    parsed = parse_key(key)
    if isinstance(parsed, KeyProblem):
        return None, None, parsed.value
    try:
        text: str | None = escape_in_json(at_any_depth(_partition_text, parsed.partition))
    except (TypeError, ValueError):
        text = None
    return printable(parsed.connector), text, None


class RowEncoder:
    """Log records → Avro row bytes for one log; owned by the archiver thread (no locking)."""

    def __init__(self, identity: str, origins: OriginRegistry) -> None:
        self._identity = printable(identity)  # a path the file system decoded may hold lone surrogates
        self._origins = origins
        self._epoch = -1
        self._head = b""
        self._head_crc = 0
        self._external = _OriginParts(EXTERNAL_ORIGIN)
        self._origin_parts: dict[Origin, _OriginParts] = {}
        self._keys: dict[bytes | None, tuple[bytes, bytes, bytes]] = {}
        self._keys_bytes = 0
        self._seen = bytearray(_SEEN_BITS // 8)
        self._times: tuple[int, bytes, int, bytes] = (0, encode_long(0), 0, encode_long(0))
        """The last record timestamp and arrival time, encoded: both repeat from row to row."""

    def _key_parts(self, key: bytes | None) -> tuple[bytes, bytes, bytes]:
        """The key's three trailing fields, encoded; their piece of the checksum's text; and, for a
        record of external origin, every checksummed byte from the origin to the end of the key."""
        found = self._keys.get(key)
        if found is not None:
            return found
        connector, partition_json, problem = key_fields(key)
        text = f"{connector}\x1f{partition_json}\x1f{problem}".encode()
        parts = (
            _optional_string(connector) + _optional_string(partition_json) + _optional_string(problem),
            text,
            self._external.crc_middle + text + (_NULL if key is None else b"\x01%d:%b" % (len(key), key)),
        )
        if self._seen_before(key):
            size = len(parts[0]) + len(text) + len(parts[2]) + _KEY_ENTRY_OVERHEAD
            if self._keys_bytes + size > _KEY_CACHE_BYTES:
                self._keys.clear()
                self._keys_bytes = 0
                self._seen = bytearray(_SEEN_BITS // 8)
            self._keys[key] = parts
            self._keys_bytes += size
        return parts

    def _seen_before(self, key: bytes | None) -> bool:
        """Mark the key seen; whether all its bits were already set (it probably was)."""
        h = hash(key)
        seen = self._seen
        before = True
        for bit in (h & _SEEN_MASK, (h >> 20) & _SEEN_MASK, (h >> 40) & _SEEN_MASK):
            byte, mask = bit >> 3, 1 << (bit & 7)
            if not seen[byte] & mask:
                seen[byte] |= mask
                before = False
        return before

    def _origin(self, origin: Origin) -> _OriginParts:
        found = self._origin_parts.get(origin)
        if found is None:
            if len(self._origin_parts) >= 10_000:  # every client's address is its own origin
                self._origin_parts.clear()
            found = self._origin_parts[origin] = _OriginParts(origin)
        return found

    def encode(self, record: LogRecord, epoch: int, received_ms: int) -> bytes:
        """One row: the fields of ``schemas/history-record.avsc`` in order, checksum last."""
        if epoch != self._epoch:
            self._epoch = epoch
            self._head = _string(self._identity) + encode_long(epoch)
            self._head_crc = zlib.crc32(f"{self._identity}\x1f{epoch}\x1f".encode())
        origin = self._origins.lookup(record) if self._origins.enabled else EXTERNAL_ORIGIN
        key, value = record.key, record.value
        key_avro, key_text, external_crc = self._key_parts(key)
        p, o, ts = record.partition, record.offset, record.timestamp_ms
        times = self._times
        if times[0] != ts or times[2] != received_ms:
            times = self._times = (ts, encode_long(ts), received_ms, encode_long(received_ms))
        crc = zlib.crc32(f"{p}\x1f{o}\x1f{ts}\x1f{received_ms}\x1f".encode(), self._head_crc)
        if origin is EXTERNAL_ORIGIN:  # every record of a replay: one checksum call up to the value
            op = self._external
            crc = zlib.crc32(external_crc, crc)
        else:
            op = self._origin(origin)
            crc = zlib.crc32(key_text, zlib.crc32(op.crc_middle, crc))
            if op.crc_tail:
                crc = zlib.crc32(op.crc_tail, crc)
            crc = zlib.crc32(_NULL if key is None else b"\x01%d:%b" % (len(key), key), crc)
        if value is None:
            crc = zlib.crc32(_NULL, crc)
            value_field = _NULL
        else:
            crc = zlib.crc32(b"\x01%d:%b" % (len(value), value), crc)
            value_field = _SOME + encode_long(len(value)) + value
        key_field = _NULL if key is None else _SOME + encode_long(len(key)) + key
        return b"".join(
            (
                self._head,
                encode_long(p),
                encode_long(o),
                times[1],
                times[3],
                op.avro,
                key_field,
                value_field,
                key_avro,
                encode_long(crc),
            )
        )


BLOCK_BYTES = 64 * 1024
"""Uncompressed bytes per Avro block, as the fastavro writer's ``sync_interval`` was."""


def write_blocks(fo: IO[bytes], rows: Sequence[bytes], codec: str, sync_marker: bytes) -> None:
    """Append ``rows`` (encoded) to a container file as blocks of about ``BLOCK_BYTES`` each.

    ``codec`` is the file's (``null`` or ``deflate``, raw deflate as the Avro spec says); zlib
    releases the GIL while it compresses, so the reader thread runs meanwhile.
    """
    start = 0
    total = len(rows)
    while start < total:
        size = 0
        end = start
        while end < total and (size < BLOCK_BYTES or end == start):
            size += len(rows[end])
            end += 1
        data = b"".join(rows[start:end])
        if codec == "deflate":
            compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
            data = compressor.compress(data) + compressor.flush()
        elif codec != "null":
            raise ValueError(f"history codec {codec!r} is not supported by the archive writer (null, deflate)")
        fo.write(encode_long(end - start) + encode_long(len(data)) + data + sync_marker)
        start = end
