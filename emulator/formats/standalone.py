"""Connect's standalone offsets file (``FileOffsetBackingStore``), read and written without a JVM.

The file is one Java-serialized ``java.util.HashMap<byte[], byte[]>``: the same key and value bytes
as in the offsets topic, tombstones kept as ``null`` values (docs/protocol.md §6). The
format has not changed since Kafka 0.9.0, so a small reader for exactly that object graph is both
safer and more honest than a general Java deserializer: anything that is not a ``HashMap`` of
``byte[]`` (or ``null``, or a back-reference to one of those) is refused by name.

Two deliberate differences from Connect:

- Connect treats a truncated file (``EOFException``) as *no offsets at all*, silently; here any
  truncation or damage is a ``FormatError`` naming what was expected at which byte offset, and the
  caller imports nothing.
- Connect rewrites the file in place (``newOutputStream`` truncates it first); ``write_file``
  writes a temporary file, fsyncs it and renames it over the old one, so a crash leaves either the
  old or the new file, never half of one.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from emulator.formats.atomic import atomic_write
from emulator.formats.file_kinds import STREAM_TIMEOUT_S, read_source
from emulator.formats.model import FormatError, Loaded, RawRecord, Tick, tick

__all__ = ["dumps", "load_file", "loads", "write_file"]

# --- Java Object Serialization Stream Protocol constants (java.io.ObjectStreamConstants) -----------

STREAM_MAGIC: Final = 0xACED
STREAM_VERSION: Final = 5
TC_NULL: Final = 0x70
TC_REFERENCE: Final = 0x71
TC_CLASSDESC: Final = 0x72
TC_OBJECT: Final = 0x73
TC_STRING: Final = 0x74
TC_ARRAY: Final = 0x75
TC_CLASS: Final = 0x76
TC_BLOCKDATA: Final = 0x77
TC_ENDBLOCKDATA: Final = 0x78
TC_RESET: Final = 0x79
TC_BLOCKDATALONG: Final = 0x7A
TC_EXCEPTION: Final = 0x7B
TC_LONGSTRING: Final = 0x7C
TC_PROXYCLASSDESC: Final = 0x7D
TC_ENUM: Final = 0x7E
BASE_HANDLE: Final = 0x7E0000
SC_WRITE_METHOD: Final = 0x01
SC_SERIALIZABLE: Final = 0x02

HASHMAP_CLASS: Final = "java.util.HashMap"
HASHMAP_SUID: Final = 0x0507DAC1C31660D1  # 362498820763181265
BYTE_ARRAY_CLASS: Final = "[B"
BYTE_ARRAY_SUID: Final = 0xACF317F8060854E0  # -5984413125824719648
_HASHMAP_FIELDS: Final = (("F", "loadFactor"), ("I", "threshold"))
_PRIMITIVE_SIZES: Final = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}
_TC_NAMES: Final = {
    TC_NULL: "TC_NULL",
    TC_REFERENCE: "TC_REFERENCE",
    TC_CLASSDESC: "TC_CLASSDESC",
    TC_OBJECT: "TC_OBJECT",
    TC_STRING: "TC_STRING (a java.lang.String)",
    TC_ARRAY: "TC_ARRAY",
    TC_CLASS: "TC_CLASS (a java.lang.Class)",
    TC_BLOCKDATA: "TC_BLOCKDATA",
    TC_ENDBLOCKDATA: "TC_ENDBLOCKDATA",
    TC_RESET: "TC_RESET",
    TC_BLOCKDATALONG: "TC_BLOCKDATALONG",
    TC_EXCEPTION: "TC_EXCEPTION (a serialized exception)",
    TC_LONGSTRING: "TC_LONGSTRING (a java.lang.String)",
    TC_PROXYCLASSDESC: "TC_PROXYCLASSDESC (a dynamic proxy)",
    TC_ENUM: "TC_ENUM (an enum constant)",
}


def _tc_name(code: int) -> str:
    return _TC_NAMES.get(code, f"0x{code:02x}, which is not a serialization type code")


class _ClassDesc:
    __slots__ = ("fields", "flags", "name", "suid")

    def __init__(self, name: str, suid: int, flags: int, fields: list[tuple[str, str]]) -> None:
        self.name = name
        self.suid = suid
        self.flags = flags
        self.fields = fields


class _Array:
    """A ``byte[]`` already read, so that a back-reference to it yields the same bytes (and place)."""

    __slots__ = ("at", "data")

    def __init__(self, data: bytes, at: int) -> None:
        self.data = data
        self.at = at
        """Byte offset of the array's first element in the file."""


class _HashMapMarker:
    """The handle of the map being read: a reference to it (a self-containing map) is refused."""


_Handle = _ClassDesc | _Array | _HashMapMarker


class _Reader:
    """A cursor over the file that knows what it is reading, so every error can say so."""

    def __init__(self, data: bytes, source: str | None) -> None:
        self.data = data
        self.pos = 0
        self.source = source
        self.handles: list[_Handle] = []
        self.array_prefix: bytes | None = None
        self.last_array_at: int | None = None
        """Where the data of the last key or value read starts (``None`` after a null)."""

    def fail(self, message: str, at: int | None = None) -> FormatError:
        where = self.pos if at is None else at
        return FormatError(message, source=self.source, where=f"byte offset {where} of {len(self.data)}")

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            missing = end - len(self.data)
            raise self.fail(
                f"truncated file: {what} needs {n} byte(s) but the file ends {missing} byte(s) short "
                "(Connect would silently load such a file as NO offsets)"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        value: int = struct.unpack(">H", self.take(2, what))[0]
        return value

    def i32(self, what: str) -> int:
        value: int = struct.unpack(">i", self.take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = struct.unpack(">Q", self.take(8, what))[0]
        return value

    def utf(self, what: str) -> str:
        length = self.u16(f"the length of {what}")
        start = self.pos
        raw = self.take(length, what)
        try:
            # Java's modified UTF-8 equals UTF-8 for every class and field name this file may hold.
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8", at=start) from None

    def new_handle(self, value: _Handle) -> None:
        self.handles.append(value)

    def reference(self, what: str) -> _Handle:
        at = self.pos - 1
        handle = self.i32(f"the handle of a back-reference ({what})")
        index = handle - BASE_HANDLE
        if not 0 <= index < len(self.handles):
            raise self.fail(
                f"{what} is a back-reference to handle 0x{handle & 0xFFFFFFFF:08x}, which does not exist "
                f"({len(self.handles)} handle(s) assigned so far)",
                at=at,
            )
        return self.handles[index]

    # --- grammar ------------------------------------------------------------------------------

    def class_desc(self, what: str) -> _ClassDesc:
        at = self.pos
        code = self.u8(f"the class descriptor of {what}")
        if code == TC_REFERENCE:
            target = self.reference(f"the class descriptor of {what}")
            if not isinstance(target, _ClassDesc):
                raise self.fail(f"the class descriptor of {what} refers to something that is not a class", at=at)
            return target
        if code != TC_CLASSDESC:
            raise self.fail(f"expected the class descriptor of {what}, found {_tc_name(code)}", at=at)
        name = self.utf(f"the class name of {what}")
        suid = self.u64(f"the serialVersionUID of {name}")
        desc = _ClassDesc(name, suid, 0, [])
        self.new_handle(desc)
        desc.flags = self.u8(f"the flags of {name}")
        count = self.u16(f"the field count of {name}")
        for _ in range(count):
            field_at = self.pos
            type_code = chr(self.u8(f"a field type code of {name}"))
            field_name = self.utf(f"a field name of {name}")
            if type_code not in _PRIMITIVE_SIZES:
                raise self.fail(
                    f"class {name} has an object-typed field {field_name!r} ({type_code!r}); a "
                    "standalone offsets file holds only java.util.HashMap and byte[]",
                    at=field_at,
                )
            desc.fields.append((type_code, field_name))
        end_at = self.pos
        end = self.u8(f"the end of the class annotation of {name}")
        if end != TC_ENDBLOCKDATA:
            raise self.fail(
                f"class {name} carries a class annotation ({_tc_name(end)}); expected TC_ENDBLOCKDATA",
                at=end_at,
            )
        super_at = self.pos
        parent = self.u8(f"the superclass descriptor of {name}")
        if parent != TC_NULL:
            raise self.fail(
                f"class {name} has a serializable superclass ({_tc_name(parent)}); neither "
                "java.util.HashMap nor byte[] has one",
                at=super_at,
            )
        return desc

    def map_object(self, progress: Tick | None = None) -> list[tuple[bytes | None, bytes | None, int | None]]:
        at = self.pos
        code = self.u8("the top-level object")
        if code != TC_OBJECT:
            raise self.fail(
                f"expected the top-level object to be a java.util.HashMap (TC_OBJECT), found {_tc_name(code)}", at=at
            )
        desc_at = self.pos
        desc = self.class_desc("the top-level object")
        if desc.name != HASHMAP_CLASS:
            # Connect's own message for this case: "Expected HashMap but found <class>".
            raise self.fail(f"Expected HashMap but found {desc.name}: refusing to read any other class", at=desc_at)
        if desc.suid != HASHMAP_SUID:
            raise self.fail(
                f"java.util.HashMap has serialVersionUID 0x{desc.suid:016x}, expected 0x{HASHMAP_SUID:016x}", at=desc_at
            )
        if desc.flags != SC_WRITE_METHOD | SC_SERIALIZABLE:
            raise self.fail(f"java.util.HashMap has class flags 0x{desc.flags:02x}, expected 0x03", at=desc_at)
        if tuple(desc.fields) != _HASHMAP_FIELDS:
            raise self.fail(
                f"java.util.HashMap declares fields {desc.fields}, expected {list(_HASHMAP_FIELDS)}", at=desc_at
            )
        self.new_handle(_HashMapMarker())
        load_at = self.pos
        (load_factor,) = struct.unpack(">f", self.take(4, "HashMap.loadFactor"))
        if not load_factor > 0:  # also catches NaN, as HashMap.readObject does
            raise self.fail(f"illegal HashMap load factor {load_factor}", at=load_at)
        self.i32("HashMap.threshold")
        block = self.block_data(8, "the HashMap's bucket count and size")
        size_at = self.pos - 4
        (size,) = struct.unpack(">i", block[4:8])
        if size < 0:
            raise self.fail(f"illegal HashMap size {size}", at=size_at)
        # Each entry takes at least two bytes (TC_NULL, TC_NULL): a size beyond that is damage, and
        # checking it first keeps a corrupt count from looking like a slow read.
        remaining = len(self.data) - self.pos
        if size * 2 > remaining:
            raise self.fail(
                f"the HashMap declares {size} entries but only {remaining} byte(s) follow; the file is truncated "
                "(Connect would silently load it as NO offsets)",
                at=size_at,
            )
        entries = []
        for index in range(size):
            tick(progress, index, size)
            key = self.byte_array_or_null("key", index, size)
            value = self.byte_array_or_null("value", index, size)
            entries.append((key, value, self.last_array_at))
        end_at = self.pos
        end = self.u8("the end of the HashMap's entries")
        if end != TC_ENDBLOCKDATA:
            raise self.fail(
                f"expected TC_ENDBLOCKDATA after the HashMap's {size} declared entries, found {_tc_name(end)}",
                at=end_at,
            )
        return entries

    def block_data(self, n: int, what: str) -> bytes:
        at = self.pos
        code = self.u8(f"the block data holding {what}")
        if code == TC_BLOCKDATA:
            length = self.u8(f"the length of the block data holding {what}")
        elif code == TC_BLOCKDATALONG:
            length = self.i32(f"the length of the block data holding {what}")
        else:
            raise self.fail(f"expected block data holding {what}, found {_tc_name(code)}", at=at)
        if length != n:
            raise self.fail(f"the block data holding {what} is {length} byte(s) long, expected {n}", at=at)
        return self.take(n, what)

    def byte_array_or_null(self, role: str, index: int, size: int) -> bytes | None:
        """One key or value. The common shapes (null, or a byte[] whose class is a back-reference)
        are read inline: a 100,000-entry file is 200,000 of them."""
        data, pos = self.data, self.pos
        code = data[pos] if pos < len(data) else -1
        if code == TC_NULL:
            self.pos = pos + 1
            self.last_array_at = None
            return None
        if self.array_prefix is not None and data.startswith(self.array_prefix, pos):
            length = int.from_bytes(data[pos + 6 : pos + 10], "big", signed=True)
            end = pos + 10 + length
            if length >= 0 and end <= len(data) and pos + 10 <= len(data):
                value = data[pos + 10 : end]
                self.handles.append(_Array(value, pos + 10))
                self.last_array_at = pos + 10
                self.pos = end
                return value
        return self._byte_array_or_null_slow(f"the {role} of entry {index} of {size}")

    def _byte_array_or_null_slow(self, what: str) -> bytes | None:
        at = self.pos
        code = self.u8(what)
        if code == TC_NULL:
            self.last_array_at = None
            return None
        if code == TC_REFERENCE:
            target = self.reference(what)
            if isinstance(target, _Array):
                self.last_array_at = target.at
                return target.data
            kind = "the map itself" if isinstance(target, _HashMapMarker) else f"class {target.name}"
            raise self.fail(f"{what} is a back-reference to {kind}, not to a byte[]", at=at)
        if code != TC_ARRAY:
            raise self.fail(f"{what} must be a byte[] (TC_ARRAY) or null, found {_tc_name(code)}", at=at)
        desc_at = self.pos
        handles_before = len(self.handles)
        desc = self.class_desc(what)
        if desc.name != BYTE_ARRAY_CLASS:
            raise self.fail(f"{what} is an array of class {desc.name}, expected byte[] ([B)", at=desc_at)
        if desc.suid != BYTE_ARRAY_SUID:
            raise self.fail(
                f"byte[] has serialVersionUID 0x{desc.suid:016x}, expected 0x{BYTE_ARRAY_SUID:016x}", at=desc_at
            )
        if desc.fields:
            raise self.fail(f"byte[] declares fields {desc.fields}", at=desc_at)
        if len(self.handles) > handles_before and self.array_prefix is None:
            # The [B class was just defined: later arrays refer to it as TC_ARRAY TC_REFERENCE <handle>.
            handle = BASE_HANDLE + handles_before
            self.array_prefix = bytes([TC_ARRAY, TC_REFERENCE]) + handle.to_bytes(4, "big")
        array = _Array(b"", 0)
        self.new_handle(array)
        length_at = self.pos
        length = self.i32(f"the length of {what}")
        if length < 0:
            raise self.fail(f"{what} has a negative length {length}", at=length_at)
        array.at = self.last_array_at = self.pos
        array.data = self.take(length, f"{what} ({length} bytes)")
        return array.data


def loads(data: bytes, source: str | None = None, progress: Tick | None = None) -> Loaded:
    """Parse a standalone offsets file's bytes into records, in file order (tombstones kept).

    Raises ``FormatError`` for any truncation, damage or unexpected class; returns nothing partial.
    ``progress`` is told every ``TICK_EVERY`` entries how many were read, of how many.
    """
    reader = _Reader(data, source)
    if not data:
        raise reader.fail(
            "the file is empty (0 bytes): not a standalone offsets file (Connect would silently load it as NO offsets)"
        )
    magic = reader.u16("the stream magic")
    if magic != STREAM_MAGIC:
        raise reader.fail(
            f"not a Java serialization stream: starts with 0x{magic:04x}, expected 0xaced "
            "(is this a standalone offsets file?)",
            at=0,
        )
    version = reader.u16("the stream version")
    if version != STREAM_VERSION:
        raise reader.fail(f"Java serialization stream version {version}, expected 5", at=2)
    entries = reader.map_object(progress)
    if reader.pos != len(data):
        raise reader.fail(
            f"{len(data) - reader.pos} unexpected byte(s) after the HashMap (Connect would ignore them; they "
            "suggest the file was damaged)"
        )
    records: list[RawRecord] = []
    null_keys = 0
    for key, value, value_at in entries:
        if key is None:
            null_keys += 1
            continue
        records.append(RawRecord(key, value, value_at=value_at))
    result = Loaded(records)
    if null_keys:
        result.notes.append(
            f"{null_keys} entr{'y' if null_keys == 1 else 'ies'} with a null key skipped "
            "(Connect ignores such keys: 'Ignoring offset partition key with an unexpected null value')"
        )
    duplicates = len(records) - len({r.key for r in records})
    if duplicates:
        result.notes.append(
            f"{duplicates} key(s) appear more than once (as distinct byte[] objects); the later entry wins, as "
            "when Connect loads the file"
        )
    tombstones = sum(1 for r in records if r.value is None)
    if tombstones:
        result.notes.append(f"{tombstones} tombstone(s) (null values) kept as deletions")
    return result


def load_file(path: str | Path) -> Loaded:
    path = Path(path)
    try:
        data = read_source(path, timeout_s=STREAM_TIMEOUT_S)
    except OSError as exc:
        raise FormatError(f"cannot read the standalone offsets file: {exc.strerror or exc}", source=str(path)) from exc
    return loads(data, source=str(path))


# --- writing ---------------------------------------------------------------------------------------


def _utf(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">H", len(raw)) + raw


def _capacity_after_puts(n: int) -> tuple[int, int]:
    """(table capacity, threshold) of ``new HashMap<>()`` after ``n`` puts of distinct keys.

    ``FileOffsetBackingStore.save`` builds its map exactly so; HashMap's ``readObject`` ignores
    both numbers, but matching them makes a one-entry file identical to Java's, byte for byte.
    """
    if n == 0:
        return 16, 0  # no table yet: capacity() answers the default, the threshold field is still 0
    capacity = 16
    while n > capacity * 3 // 4:
        capacity *= 2
    return capacity, capacity * 3 // 4


def dumps(records: Iterable[RawRecord], progress: Tick | None = None) -> bytes:
    """Serialize records as Java's ``ObjectOutputStream.writeObject(HashMap<byte[],byte[]>)`` does.

    Later records win over earlier ones with the same key (a map holds one value per key); entries
    are written in first-seen key order. Tombstones are written as ``null`` values, as Connect does.
    """
    latest: dict[bytes, bytes | None] = {}
    for record in records:
        latest[record.key] = record.value
    capacity, threshold = _capacity_after_puts(len(latest))
    out = bytearray()
    out += struct.pack(">HH", STREAM_MAGIC, STREAM_VERSION)
    out += bytes([TC_OBJECT, TC_CLASSDESC]) + _utf(HASHMAP_CLASS) + struct.pack(">Q", HASHMAP_SUID)
    out += bytes([SC_WRITE_METHOD | SC_SERIALIZABLE]) + struct.pack(">H", len(_HASHMAP_FIELDS))
    for type_code, name in _HASHMAP_FIELDS:
        out += type_code.encode("ascii") + _utf(name)
    out += bytes([TC_ENDBLOCKDATA, TC_NULL])
    out += struct.pack(">fi", 0.75, threshold)
    out += bytes([TC_BLOCKDATA, 8]) + struct.pack(">ii", capacity, len(latest))
    # Handles: 0 = HashMap class, 1 = the map, 2 = byte[] class (first array), then one per array.
    byte_array_class_written = False

    def array(data: bytes) -> None:
        nonlocal byte_array_class_written
        out.append(TC_ARRAY)
        if byte_array_class_written:
            out.append(TC_REFERENCE)
            out.extend(struct.pack(">I", BASE_HANDLE + 2))
        else:
            out.append(TC_CLASSDESC)
            out.extend(_utf(BYTE_ARRAY_CLASS) + struct.pack(">Q", BYTE_ARRAY_SUID))
            out.extend(bytes([SC_SERIALIZABLE, 0, 0, TC_ENDBLOCKDATA, TC_NULL]))
            byte_array_class_written = True
        out.extend(struct.pack(">i", len(data)))
        out.extend(data)

    for number, (key, value) in enumerate(latest.items(), start=1):
        tick(progress, number, len(latest))
        array(key)
        if value is None:
            out.append(TC_NULL)
        else:
            array(value)
    out.append(TC_ENDBLOCKDATA)
    return bytes(out)


def write_file(path: str | Path, records: Iterable[RawRecord], progress: Tick | None = None) -> int:
    """Atomically replace ``path`` with a standalone offsets file holding ``records``.

    Temp file, fsync, rename (Connect truncates and rewrites in place): a crash at any point leaves
    the previous file or the complete new one. Returns the number of bytes written.
    """
    return atomic_write(path, dumps(records, progress))
