"""The CLI's human output escapes what a terminal would act on (``emulator.codec.shown``).

A connector name may hold a newline (Connect's name validator only applies to names that come
through Connect's REST API; any tool may write the log): ``list`` printed ``ctl`` and a fake
``fake-name`` on two lines. Names are shown in Python's quoted form when they hold an unprintable
character, JSON text (partitions, offsets, raw keys and values) with JSON escapes; ``--json`` is
the daemon's answer, untouched."""

from __future__ import annotations

import json

from emulator.cli.claims import _text as claim_text
from emulator.cli.history import history_text, rollback_text
from emulator.cli.offsets import modify_text, offsets_table
from emulator.codec.shown import shown_json, shown_name
from emulator.formats.diff import compute_diff, render_text
from emulator.formats.model import RawRecord

NASTY = "ctl\nfake-name"


def test_a_name_is_shown_as_it_is_unless_it_holds_an_unprintable_character_or_looks_quoted() -> None:
    assert shown_name("my-source") == "my-source"
    assert shown_name("données ✓") == "données ✓"
    assert shown_name(NASTY) == "'ctl\\nfake-name'"
    assert shown_name("a\x1b[31mred") == "'a\\x1b[31mred'"  # a terminal's escape sequence
    assert shown_name("evil\u202egnp.exe") == "'evil\\u202egnp.exe'"  # a bidirectional override
    assert shown_name("half\ud800") == "'half\\ud800'"
    assert shown_name("'ctl\\nfake-name'") == "\"'ctl\\\\nfake-name'\""  # never taken for an escaped name
    assert shown_name("") == "''"


def test_json_text_keeps_printable_characters_and_escapes_the_others_as_json_does() -> None:
    text = json.dumps({"f": "a\u2028b\x85c\U000e0001é"}, ensure_ascii=False)
    shown = shown_json(text)
    assert shown == '{"f": "a\\u2028b\\u0085c\\udb40\\udc01é"}'
    assert json.loads(shown) == json.loads(text), "the same JSON"
    assert shown_json('{"f":"plain"}') == '{"f":"plain"}'


def test_every_human_output_shows_a_name_or_partition_on_its_own_line() -> None:
    key = json.dumps([NASTY, {"f": "x\u2028y"}], ensure_ascii=False)
    outputs = [
        offsets_table([{"partition": {"f": "x\u2028y"}, "offset": {"o": "\x1b[2J"}}]),
        modify_text({"message": "Dry run", "records": [{"key": key, "value": None, "kafka_partition": 1}]}),
        modify_text(
            {
                "message": "Dry run",
                "records": [
                    {
                        "consumer_group": f"connect-{NASTY}",
                        "action": "commit",
                        "kafka_topic": "t\nu",
                        "kafka_partition": 0,
                        "kafka_offset": 5,
                    }
                ],
            }
        ),
        claim_text({"connector": NASTY, "owner": "job\n1", "epoch": 3}),
        history_text(
            {
                "changes": [
                    {
                        "time": "2026-11-28T00:00:00.000Z",
                        "origin": "daemon",
                        "operation": "PATCH",
                        "principal": "bob\nalice",
                        "remote": "127.0.0.1:5",
                        "kafka_partition": 0,
                        "kafka_offset": 1,
                        "value": "{\u2028}",
                        "offset": None,
                        "partition": None,
                        "key": key,
                    }
                ]
            }
        ),
        rollback_text(
            {
                "message": "Dry run",
                "changes": [
                    {
                        "action": "restore",
                        "kafka_partition": 0,
                        "key": key,
                        "current_value": "{\n}",
                        "target_value": None,
                    }
                ],
            }
        ),
        render_text(compute_diff(lambda _k: None, [RawRecord(key.encode(), b'{"o":"\\n\x0b"}')]).as_dict()),
    ]
    for text in outputs:
        assert all(line.isprintable() for line in text.splitlines()), text
    assert claim_text({"connector": NASTY, "owner": "o", "epoch": 3}) == "'ctl\\nfake-name': claimed by 'o', epoch 3"
    assert "connector 'ctl\\nfake-name': 1 added" in outputs[-1]
    assert "group 'connect-ctl\\nfake-name'  commit  't\\nu'[0] -> 5" in outputs[2]
