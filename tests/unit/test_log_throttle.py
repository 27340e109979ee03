"""Throttled log lines: the count of the lines left out is logged when their window ends, never later.

An incident that ends within a window used to leave its count waiting for the next line of the same
kind: 19 writes answered 503 were logged as 16, and a line minutes later said "(1 more like it in
the 30 s before)" of a failure long past. Each test uses a window of a fraction of a second.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable, Iterator

import pytest

from emulator.log_throttle import Throttle, held_message, report_all_held
from emulator.logs.kafka.log_throttle import LibrdkafkaFilter
from emulator.model import errors
from emulator.server import errors as server_errors
from emulator.server.invalid_requests import UVICORN_LOGGER, UVICORN_MESSAGE, InvalidRequests

WINDOW_S = 0.2


class Reports:
    def __init__(self) -> None:
        self.lines: list[tuple[Hashable, int, float]] = []
        self.arrived = threading.Event()

    def __call__(self, kind: Hashable, held: int, ends_at: float) -> None:
        self.lines.append((kind, held, ends_at))
        self.arrived.set()


def timers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]


@pytest.fixture(autouse=True)
def no_timer_left() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 2
    while timers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not timers(), "a throttle's timer outlived its window"


def test_the_count_of_a_window_is_reported_when_it_ends_without_another_occurrence() -> None:
    reports = Reports()
    throttle = Throttle(reports, WINDOW_S)
    before = time.time()
    assert throttle.admit("log_timeout") is True
    assert [throttle.admit("log_timeout") for _ in range(18)] == [False] * 18
    assert reports.lines == []  # nothing reported while the window lasts
    assert reports.arrived.wait(5)
    ((kind, held, ends_at),) = reports.lines
    assert (kind, held) == ("log_timeout", 18)  # 1 logged + 18 counted = every one of the 19
    assert before + WINDOW_S <= ends_at <= time.time() + 0.05


def test_an_occurrence_after_the_window_is_logged_alone_and_the_old_count_is_not_carried_to_it() -> None:
    reports = Reports()
    throttle = Throttle(reports, WINDOW_S)
    throttle.admit("k")
    throttle.admit("k")
    assert reports.arrived.wait(5)
    assert [(kind, held) for kind, held, _ in reports.lines] == [("k", 1)]
    assert throttle.admit("k") is True  # a new window, logged at once
    time.sleep(WINDOW_S + 0.1)
    assert len(reports.lines) == 1, "a window that left nothing out reports nothing"


def test_kinds_are_counted_apart_and_a_quiet_throttle_starts_no_timer() -> None:
    reports = Reports()
    throttle = Throttle(reports, WINDOW_S)
    assert throttle.admit("a") and throttle.admit("b")
    assert not timers(), "no timer until a window leaves something out"
    throttle.admit("a")
    throttle.admit("a")
    throttle.admit("b")
    throttle.close()  # reports at once, stops the timers
    assert sorted((kind, held) for kind, held, _ in reports.lines) == [("a", 2), ("b", 1)]
    assert not timers()


def test_the_report_names_what_was_left_out_the_window_and_its_end() -> None:
    ends_at = time.mktime((2026, 11, 29, 10, 6, 42, 0, 0, -1))
    assert held_message(3, "log_timeout refusals", 30.0, ends_at) == (
        "3 more log_timeout refusals like the last in the 30 s before 10:06:42, not logged"
    )


def test_503s_of_a_kind_are_one_request_failed_line_and_a_count_at_the_windows_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    throttle = Throttle(server_errors._report_unavailable, WINDOW_S)
    monkeypatch.setattr(server_errors, "_UNAVAILABLE", throttle)
    caplog.set_level(logging.ERROR, logger=server_errors.log.name)
    for _ in range(19):
        server_errors._log_failure(errors.LogTimeout("the log did not answer"), 503)
    time.sleep(WINDOW_S + 0.3)
    lines = [r.getMessage() for r in caplog.records if r.name == server_errors.log.name]
    assert lines[0] == "request failed: the log did not answer"
    assert lines[1].startswith("request failed: 18 more log_timeout refusals like the last in the 0.2 s before ")
    assert lines[1].endswith(", not logged") and len(lines) == 2
    assert all(r.levelno == logging.ERROR for r in caplog.records)


def test_librdkafka_lines_left_out_are_counted_on_the_same_logger_and_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("emulator.logs.kafka.librdkafka.test")
    librdkafka = LibrdkafkaFilter(WINDOW_S)
    logger.addFilter(librdkafka)
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name):
            for _ in range(5):
                logger.error("%s [%s] %s", "FAIL", "rdkafka#producer-1", "Connect to broker failed")
            time.sleep(WINDOW_S + 0.3)
    finally:
        logger.removeFilter(librdkafka)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger.name]
    assert lines[0] == (logging.ERROR, "FAIL [rdkafka#producer-1] Connect to broker failed")
    assert lines[1][0] == logging.ERROR and lines[1][1].startswith(
        "4 more FAIL [rdkafka#producer-1] lines like the last in the 0.2 s before "
    )
    assert len(lines) == 2


def test_uvicorns_invalid_request_lines_are_all_counted_one_logged_and_the_rest_reported_at_the_windows_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    uvicorn = logging.getLogger(UVICORN_LOGGER)
    invalid = InvalidRequests(WINDOW_S)
    uvicorn.addFilter(invalid)
    try:
        with caplog.at_level(logging.WARNING, logger=UVICORN_LOGGER):
            for _ in range(200):
                uvicorn.warning(UVICORN_MESSAGE)
            uvicorn.warning("Unsupported upgrade request.")  # any other line passes as it is
            time.sleep(WINDOW_S + 0.3)
    finally:
        uvicorn.removeFilter(invalid)
    lines = [r.getMessage() for r in caplog.records if r.name == UVICORN_LOGGER]
    assert lines[:2] == [UVICORN_MESSAGE, "Unsupported upgrade request."]
    assert lines[2].startswith("199 more invalid HTTP requests (answered 400) like the last in the 0.2 s before ")
    assert len(lines) == 3 and invalid.count == 200


def test_a_stopping_daemon_reports_what_every_throttle_holds_as_ending_then() -> None:
    """The timers are daemon threads: a process that ends inside a window took its count with it."""
    reports = Reports()
    throttle = Throttle(reports, 30.0)
    assert throttle.admit("store_unavailable") is True
    assert throttle.admit("store_unavailable") is False
    assert throttle.admit("store_unavailable") is False

    report_all_held()  # what serve() does as the server stops

    ((kind, held, ends_at),) = reports.lines
    assert (kind, held) == ("store_unavailable", 2)
    assert ends_at <= time.time(), "the window ends at the stop, not 30 s later"
    assert not timers(), "its timer is stopped"
