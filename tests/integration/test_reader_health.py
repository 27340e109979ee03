"""The readers' health as ``/status`` and the metrics report it: end offsets that follow the log, lag,
liveness, the last error and when, dropped records. Both backends, real logs (Tansu, SQLite).

Before this, a reader reported the end offsets it captured at start forever: ``/status`` showed
``end_offsets`` stuck (at 0 on an empty log) while the positions advanced.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

import emulator.logs.kafka.reader as kafka_reader
from emulator.logs.base import OffsetLog, ReadProgress
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.model.records import LogRecord
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker

WAIT_S = 20.0


def eventually(log: OffsetLog, check: Callable[[ReadProgress], bool], what: str) -> ReadProgress:
    deadline = time.monotonic() + WAIT_S
    progress = log.progress()
    while not check(progress):
        assert time.monotonic() < deadline, f"{what} not seen within {WAIT_S} s; last progress: {progress}"
        time.sleep(0.02)
        progress = log.progress()
    return progress


def caught_up_and_level(p: ReadProgress, total: int) -> bool:
    return p.caught_up and sum(p.positions.values()) >= total and sum(p.lag().values()) == 0


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedOffsetLog]:
    log = EmbeddedOffsetLog(tmp_path, partitions=3, synchronous="NORMAL")
    log.open()
    yield log
    log.close()


def test_embedded_end_offsets_follow_the_log_after_the_replay(embedded: EmbeddedOffsetLog) -> None:
    embedded.start_reading(lambda records: None)
    started = eventually(embedded, lambda p: p.caught_up, "the replay of an empty log")
    assert sum(started.end_offsets.values()) == 0 and started.alive
    embedded.append([(b'["c",{"n":%d}]' % n, b"{}") for n in range(10)])
    level = eventually(embedded, lambda p: caught_up_and_level(p, 10), "10 records read")
    assert level.end_offsets == level.positions and sum(level.end_offsets.values()) == 10
    assert level.last_poll_at is not None and time.time() - level.last_poll_at < 5
    assert level.last_records_at is not None and level.last_error is None
    embedded.close()
    assert not embedded.progress().alive


def test_embedded_records_the_view_refused_are_counted_with_the_error_and_its_time(
    embedded: EmbeddedOffsetLog,
) -> None:
    def refusing(records: Sequence[LogRecord]) -> None:
        raise RuntimeError("view exploded")

    embedded.append([(b'["c",{"n":1}]', b"{}"), (b'["c",{"n":2}]', b"{}")])
    before = time.time()
    embedded.start_reading(refusing)
    progress = eventually(embedded, lambda p: p.records_dropped == 2, "2 dropped records")
    assert progress.last_error is not None and "view exploded" in progress.last_error
    assert progress.last_error_at is not None and progress.last_error_at >= before
    assert progress.alive and progress.caught_up  # skipped, counted, and the reader goes on


@pytest.mark.kafka
def test_kafka_end_offsets_follow_records_written_by_others_and_the_lag_returns_to_zero(
    kafka_broker: TansuBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name, 3, {"cleanup.policy": "compact"})
    log = KafkaOffsetLog(
        kafka_broker.bootstrap, topic=topic_name, partitions=3, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
    )
    log.open()
    try:
        log.start_reading(lambda records: None)
        started = eventually(log, lambda p: p.caught_up, "the replay of an empty topic")
        assert started.end_offsets == {0: 0, 1: 0, 2: 0} and started.alive
        produced = kafka_broker.produce_raw(topic_name, [(b"k%d" % n, b"v", n % 3) for n in range(12)])
        level = eventually(log, lambda p: caught_up_and_level(p, 12), "12 records read by the tail")
        ends = {p: 1 + max(o for q, o in produced if q == p) for p in range(3)}
        assert level.end_offsets == ends == level.positions  # the broker's end, no longer the one at start
        assert level.last_poll_at is not None and time.time() - level.last_poll_at < 5
        assert level.last_records_at is not None
    finally:
        log.close()
    assert not log.progress().alive


@pytest.mark.kafka
def test_kafka_records_the_view_refused_are_counted_with_the_time_of_the_error(
    kafka_broker: TansuBroker, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_reader, "_RETRY_BACKOFF_S", 0.05)
    kafka_broker.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    kafka_broker.produce_raw(topic_name, [(b"k", b"v", 0)])

    def refusing(records: Sequence[LogRecord]) -> None:
        raise RuntimeError("view exploded")

    log = KafkaOffsetLog(
        kafka_broker.bootstrap, topic=topic_name, partitions=1, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
    )
    log.open()
    try:
        before = time.time()
        log.start_reading(refusing)
        progress = eventually(log, lambda p: p.records_dropped == 1, "1 dropped record")
        assert progress.last_error is not None and "view exploded" in progress.last_error
        assert progress.last_error_at is not None and progress.last_error_at >= before
        assert progress.alive
    finally:
        log.close()
