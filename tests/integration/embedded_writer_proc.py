"""A separate process that appends to an embedded log one record at a time and reports each ack.

Used by test_embedded_log.py to (a) SIGKILL a writer in the middle of a stream of writes and
(b) tail records written by another process. Record ``i`` is a pure function of ``i`` (``record``),
so the test can check every byte of whatever survived without talking to this process.

Usage: ``embedded_writer_proc.py DATA_DIR PARTITIONS START [COUNT]`` — appends records START,
START+1, … (forever when COUNT is absent) and prints ``i partition offset`` after each ack, flushed,
so a line on stdout is proof that the write was acknowledged.
"""

from __future__ import annotations

import sys


def record(i: int) -> tuple[bytes, bytes | None]:
    """Record ``i`` of the stream: repeating keys, tombstones, empty values and sizes that cross pages."""
    key = b'["kill-test",{"k":%d}]' % (i % 37)
    if i % 11 == 0:
        return key, None
    if i % 13 == 0:
        return key, b""
    return key, b'{"pos":%d,"pad":"%s"}' % (i, b"x" * (i * 7919 % 3000))


def main(argv: list[str]) -> int:
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

    data_dir, partitions, start = argv[1], int(argv[2]), int(argv[3])
    stop = start + int(argv[4]) if len(argv) > 4 else None
    log = EmbeddedOffsetLog(data_dir, partitions=partitions)
    log.open()
    print("ready", flush=True)
    i = start
    while stop is None or i < stop:
        (pos,) = log.append([record(i)])
        sys.stdout.write(f"{i} {pos.partition} {pos.offset}\n")
        sys.stdout.flush()
        i += 1
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
