"""Times and durations as the history routes, CLI and settings accept them."""

from __future__ import annotations

import pytest

from emulator.model.times import format_time_ms, parse_duration_s, parse_size_bytes, parse_time_ms


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


@pytest.mark.parametrize("text", ["yesterday", "", "1.5", "2023-13-01T00:00:00Z"])
def test_a_bad_time_names_both_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"ISO-8601.*epoch milliseconds"):
        parse_time_ms(text)


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
