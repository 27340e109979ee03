"""The GET body cache: a body is served only under the version it was rendered from, and memory is bounded."""

from __future__ import annotations

from emulator.server.body_cache import BodyCache


def body(size: int, fill: bytes = b"x") -> bytes:
    return fill * size


def test_a_body_is_served_only_while_its_version_holds() -> None:
    cache = BodyCache(budget_bytes=1000, min_bytes=10)
    cache.put("c", ("v", 1), body(100))

    assert cache.get("c", ("v", 1)) == body(100)
    assert cache.get("c", ("v", 2)) is None
    assert cache.stats() == {"bodies": 1, "bytes": 100, "hits": 1, "misses": 1}


def test_small_and_oversized_bodies_are_not_kept_and_a_put_replaces_the_old_body() -> None:
    cache = BodyCache(budget_bytes=1000, min_bytes=10)
    cache.put("c", 1, body(100))
    cache.put("c", 2, body(5))  # too small to keep: the old body must not linger either
    cache.put("big", 1, body(1001))

    assert cache.get("c", 1) is None and cache.get("c", 2) is None and cache.get("big", 1) is None
    assert cache.stats()["bytes"] == 0


def test_the_least_recently_used_body_goes_first_when_the_budget_is_exceeded() -> None:
    cache = BodyCache(budget_bytes=300, min_bytes=10)
    for name in ("a", "b", "c"):
        cache.put(name, 1, body(100, name.encode()))
    assert cache.get("a", 1) is not None  # a is now the most recently used

    cache.put("d", 1, body(100, b"d"))

    assert cache.get("b", 1) is None
    assert [cache.get(name, 1) is not None for name in ("a", "c", "d")] == [True, True, True]
    assert cache.stats()["bytes"] == 300
