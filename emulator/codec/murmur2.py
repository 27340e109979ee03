"""Java's ``Utils.murmur2`` and the producer's keyed-partition choice.

Connect's offset writer leaves partitioning to the Java producer, which places keyed records at
``toPositive(murmur2(key)) % numPartitions``. librdkafka's default partitioner (CRC32) disagrees,
so a writer sharing the topic with Connect must compute this itself: otherwise our record and
Connect's record for the same key live in different partitions and compaction never merges them.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Return Java's ``Utils.murmur2(data)``: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    # One unpack for every 4-byte block: the per-block slicing dominated the pure-Python cost.
    for k in struct.unpack_from(f"<{blocks}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    base = blocks * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, num_partitions: int) -> int:
    """The partition Java's producer picks for a keyed record: ``(murmur2 & 0x7fffffff) % n``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
