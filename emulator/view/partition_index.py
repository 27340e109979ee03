"""Which live raw keys denote each logical partition of one connector, without keeping the partitions.

Connect lists a connector's partitions from a ``HashSet<Map>``, so byte-different keys (other key
order, whitespace or number format) can denote one logical partition, and an alter must reach all of
them. Keeping each key's parsed map and logical id in memory cost about 600 B per key; this index
keeps a 30-bit hash of the logical id (a small int, 32 B) pointing at the key bytes the view holds
anyway. Keys whose logical ids collide share a bucket; readers re-parse a bucket's keys and compare
logical ids (``OffsetView.find``/``offsets``), so a collision costs a parse, never a wrong answer.
"""

from __future__ import annotations

_MASK = (1 << 30) - 1


def bucket_of(logical_id: str) -> int:
    """The bucket of a logical partition id (``emulator.codec.keys.logical_id``) in this process.

    ``hash`` of a str is salted per process: fine for an index that lives only in memory, and it
    keeps another process from choosing keys that all collide."""
    return hash(logical_id) & _MASK


class PartitionIndex:
    """Buckets of one connector: a hash → one key (the common case) or keys oldest-first."""

    __slots__ = ("_buckets", "crowded")

    def __init__(self) -> None:
        self._buckets: dict[int, bytes | tuple[bytes, ...]] = {}
        self.crowded = 0
        """How many buckets hold more than one key (aliases or collisions): while it is 0, a rewrite
        of a live key cannot change any order and needs no parse to find its bucket."""

    def add(self, bucket: int, key: bytes) -> None:
        """Put ``key`` last in its bucket: within a logical partition the newest write is last."""
        current = self._buckets.get(bucket)
        if current is None:
            self._buckets[bucket] = key
        elif isinstance(current, bytes):
            if current != key:
                self._buckets[bucket] = (current, key)
                self.crowded += 1
        else:
            self._buckets[bucket] = (*(k for k in current if k != key), key)

    def remove(self, bucket: int, key: bytes) -> None:
        current = self._buckets.get(bucket)
        if current is None:
            return
        if isinstance(current, bytes):
            if current == key:
                del self._buckets[bucket]
            return
        rest = tuple(k for k in current if k != key)
        if len(rest) == 1:
            self._buckets[bucket] = rest[0]
            self.crowded -= 1
        else:
            self._buckets[bucket] = rest

    def keys_in(self, bucket: int) -> tuple[bytes, ...]:
        current = self._buckets.get(bucket)
        if current is None:
            return ()
        return (current,) if isinstance(current, bytes) else current

    def buckets(self) -> list[bytes | tuple[bytes, ...]]:
        """Each bucket as stored: one key, or several oldest-first."""
        return list(self._buckets.values())
