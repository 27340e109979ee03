"""The transactional ids a write fences before it writes, from a ``tasks-fencing`` record's count.

The count is read as Connect reads it (any int), so the ids are made as they are used: a count of
2,147,483,647 is as cheap to hold as one of 3.
"""

from __future__ import annotations

import tracemalloc

from emulator.model.exactly_once import ExactlyOnceSource, TaskTransactionalIds

EOS = ExactlyOnceSource("enabled", "connect-cluster")


def test_tasks_1_to_n_minus_1_are_named_as_connect_names_them() -> None:
    ids = TaskTransactionalIds(EOS, "orders", 4)
    assert list(ids) == ["connect-cluster-orders-1", "connect-cluster-orders-2", "connect-cluster-orders-3"]
    assert len(ids) == 3
    assert ids[0] == "connect-cluster-orders-1" and ids[-1] == "connect-cluster-orders-3"
    assert ids[1:] == ["connect-cluster-orders-2", "connect-cluster-orders-3"]


def test_no_ids_for_a_count_of_one_none_or_a_negative_one() -> None:
    for count in (1, 0, -5, -(2**31)):
        ids = TaskTransactionalIds(EOS, "orders", count)
        assert len(ids) == 0 and list(ids) == [] and ids[0:16] == []


def test_the_largest_count_connect_reads_costs_no_memory_until_read() -> None:
    tracemalloc.start()
    try:
        ids = TaskTransactionalIds(EOS, "orders", 2**31 - 1)
        first_wave = ids[0:16]
        last = ids[-1]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(ids) == 2**31 - 2
    assert first_wave[0] == "connect-cluster-orders-1" and len(first_wave) == 16
    assert last == f"connect-cluster-orders-{2**31 - 2}"
    assert peak < 64 * 1024, f"{peak} bytes traced"
