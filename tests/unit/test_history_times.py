"""Times and durations as the history routes, CLI and settings accept them."""

from __future__ import annotations

import time

import pytest

from emulator.model.times import (
    MIN_TIME_MS,
    format_time_ms,
    is_relative_time,
    parse_duration_s,
    parse_size_bytes,
    parse_time_ms,
)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1700000000000", 1_700_000_000_000),
        ("0", 0),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T22:13:20.5+00:00", 1_700_000_000_500),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
        ("2023-11-14T22:13:20", 1_700_000_000_000),  # naive means UTC, not the server's zone
        ("2023-11-14", 1_699_920_000_000),
    ],
)
def test_times_are_iso_8601_or_epoch_milliseconds(text: str, ms: int) -> None:
    assert parse_time_ms(text) == ms


@pytest.mark.parametrize(
    ("text", "before_ms"),
    [
        ("now", 0),
        ("now-1h", 3_600_000),
        ("now-90m", 5_400_000),
        ("now-1.5d", 129_600_000),
        ("now-2w", 1_209_600_000),
        ("now-30s", 30_000),
        ("now-250ms", 250),
        (" now-1h ", 3_600_000),
    ],
)
def test_now_less_a_duration_is_read_against_the_clock_given(text: str, before_ms: int) -> None:
    assert is_relative_time(text)
    assert parse_time_ms(text, now_ms=1_700_000_000_000) == 1_700_000_000_000 - before_ms


def test_now_defaults_to_this_machines_clock() -> None:
    before = time.time_ns() // 1_000_000
    parsed = parse_time_ms("now-1m")
    after = time.time_ns() // 1_000_000
    assert before - 60_000 <= parsed <= after - 60_000
    assert not is_relative_time("2023-11-14T22:13:20Z") and not is_relative_time("1700000000000")


@pytest.mark.parametrize(
    "text", ["yesterday", "", "1.5", "2023-13-01T00:00:00Z", "now-1", "now-1y", "now - 1h", "NOW-1h", "now+1h", "now-"]
)
def test_a_bad_time_names_every_accepted_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"ISO-8601.*epoch milliseconds.*now-<duration> \(e\.g\. now-1h"):
        parse_time_ms(text)


def test_a_relative_time_before_year_one_is_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_time_ms("now-999999999999999w", now_ms=1_700_000_000_000)
    assert parse_time_ms("now-1d", now_ms=MIN_TIME_MS + 86_400_000) == MIN_TIME_MS


def test_times_are_shown_as_utc_iso_with_milliseconds() -> None:
    assert format_time_ms(1_700_000_000_500) == "2023-11-14T22:13:20.500Z"
    assert parse_time_ms(format_time_ms(1_700_000_000_123)) == 1_700_000_000_123


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400.0), ("12h", 43200.0), ("90m", 5400.0), ("3600", 3600.0), ("500ms", 0.5), ("2w", 1209600.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["never", "forever", "0", "none", "off"])
def test_keep_forever(text: str) -> None:
    assert parse_duration_s(text) is None


def test_bad_durations_and_sizes_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration_s("30 days")
    with pytest.raises(ValueError, match="invalid size"):
        parse_size_bytes("lots")
    assert parse_size_bytes("64MiB") == 64 * 1024 * 1024
    assert parse_size_bytes("512k") == 512 * 1024
