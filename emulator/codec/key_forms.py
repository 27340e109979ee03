"""Which of several byte-different keys of one partition Connect reads, and so which value GET shows.

A partition can sit in the log under several keys: another producer's whitespace or number format,
or another key order (a connector building its map as a ``LinkedHashMap``, Connect's REST writing it
as a ``HashMap``). Connect looks values up by exact bytes, and every converter writes compact Jackson
JSON, so the forms differ in who can ever read them:

- ``CONNECT``: the bytes Connect's own GET looks up (the partition read back into a ``HashMap`` and
  written again: ``emulator.codec.java_hashmap``), and a task whose map iterates in that order reads;
- ``COMPACT``: what a converter writes for the partition in another key order: only a task whose map
  iterates in that order reads it (Connect's GET looks up the ``HashMap`` order and shows ``null``);
- ``FOREIGN``: bytes no converter writes (spaces, ``1e0``, other escapes): no task and no GET ever
  reads them, although Connect lists their partition.

``shown_variant`` picks the value this project shows: Connect's own where it exists, otherwise the
one a task can read, otherwise none (``null``, as Connect shows it). docs/api.md states the rule.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from emulator.codec.jackson_reader import loads_lenient
from emulator.codec.jackson_writer import dumps
from emulator.codec.java_hashmap import as_read_back
from emulator.codec.values import CodecError


class KeyForm(enum.IntEnum):
    CONNECT = 0
    COMPACT = 1
    FOREIGN = 2


def key_form(raw: bytes) -> KeyForm:
    """The form of a key the view indexed (valid JSON ``[name, {partition}]``)."""
    try:
        parsed = loads_lenient(raw)
        if dumps(parsed) != raw:
            return KeyForm.FOREIGN
    except (CodecError, TypeError, ValueError):
        return KeyForm.FOREIGN
    partition = parsed[1]
    if len(partition) <= 1 and not any(type(v) in (dict, list) for v in partition.values()):
        return KeyForm.CONNECT  # one flat field has one order
    return KeyForm.CONNECT if _written_back(parsed) == raw else KeyForm.COMPACT


def connect_key(raw: bytes) -> bytes | None:
    """The bytes Connect's GET looks a listed key's partition up under (it reads the key back into
    ``HashMap``s and writes it again): for a ``FOREIGN`` key, the key a write must add for any task
    or GET to read it. ``None`` where the ``HashMap`` order is unknown (``java_hashmap``)."""
    try:
        return _written_back(loads_lenient(raw))
    except (CodecError, TypeError, ValueError):
        return None


def _written_back(parsed: object) -> bytes | None:
    read_back = as_read_back(parsed)
    return None if read_back is None else dumps(read_back)


def shown_variant(forms: Sequence[KeyForm]) -> int | None:
    """Of one partition's keys (oldest first, by their forms), the index of the one whose value is
    shown, or ``None`` (shown as ``null``).

    Connect's form wins; of several (keys whose fields share a ``HashMap`` bucket, in two orders) the
    oldest, as Connect keeps the first map its set met. Otherwise the newest compact one."""
    connect = [i for i, form in enumerate(forms) if form is KeyForm.CONNECT]
    if connect:
        return connect[0]
    compact = [i for i, form in enumerate(forms) if form is KeyForm.COMPACT]
    return compact[-1] if compact else None
