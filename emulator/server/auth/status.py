"""What ``/status``, ``/readyz`` and error answers show to whom: server file paths and raw error
texts (which name files and hosts) only to ``admin``; everyone who may see ``/status`` sees the
security settings, including the ``--insecure-no-auth`` warning."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from emulator.model.principal import Principal
from emulator.server.auth.scopes import grants_of

HIDDEN = "(shown to the admin scope only)"
DETAIL_KEYS = frozenset(
    {"log", "error", "last_error", "directory", "failure", "path", "data_dir", "recovered_files", "unreachable"}
)
"""Keys whose values may name files, directories or hosts, at any depth."""


def for_principal(body: Mapping[str, Any], principal: Principal) -> dict[str, Any]:
    if grants_of(principal.scopes).admin:
        return dict(body)
    return _redact(body)


def _redact(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in DETAIL_KEYS and value is not None:
            out[key] = HIDDEN
        elif isinstance(value, Mapping):
            out[key] = _redact(value)
        else:
            out[key] = value
    return out


THE_LOG = "the offsets log"


def message_for_principal(message: str, principal: Principal, log_description: str | None) -> str:
    """An error message as ``principal`` may read it: the log's description (``embedded:///srv/data/
    connect-offsets.sqlite3``, ``kafka://broker:9092/connect-offsets``) becomes "the offsets log",
    and the directory or brokers it names, found alone in a message (``the file system holding
    /srv/data is mounted read-only``), :data:`HIDDEN` — for anyone without ``admin``, as ``/status``
    and ``/readyz`` hide them, or a ``write:`` token's 503 would tell where the server keeps its
    files. What happened and whether anything was written stay: the caller needs those to retry."""
    if log_description is None or grants_of(principal.scopes).admin:
        return message
    shown = message.replace(log_description, THE_LOG)
    if log_description.startswith("kafka://"):
        # librdkafka names the broker it talked to, which the bootstrap list need not hold (the
        # cluster's advertised listeners): ``10.0.0.5:9092/1: Connect to ipv4#10.0.0.5:9092 failed``.
        shown = _LIBRDKAFKA_BROKER.sub(HIDDEN, shown)
    for location in _locations(log_description):
        shown = shown.replace(location, HIDDEN)
    return shown


_LIBRDKAFKA_BROKER = re.compile(
    r"ipv[46]#(?:\[[^\]]+\]|[\w.-]+):\d{1,5}"  # an address it connects to
    r"|(?:\[[^\]]+\]|[\w.-]+):\d{1,5}/(?:\d+|bootstrap)\b"  # a broker's name: host:port/<node id>
)
"""A broker as librdkafka writes it (``host:port/<node id>``, ``host:port/bootstrap``) and an address
it connects to (``ipv4#a.b.c.d:port``); a bare ``host:port`` is left alone, as times (``13:50``) look
the same."""


def _locations(description: str) -> list[str]:
    """The server locations inside a log's description: the embedded log's directory, Kafka's brokers."""
    scheme, _, rest = description.partition("://")
    if scheme == "embedded":
        directory = str(PurePosixPath(rest).parent)
        return [directory] if len(directory) > 1 else []  # "/" alone would blank every slash
    if scheme == "kafka":
        brokers = rest.partition("/")[0]
        # The whole list first: one hidden mark for it, not one per broker.
        return [brokers, *brokers.split(",")] if brokers else []
    return []
