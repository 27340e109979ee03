"""Error answers show where the log lives to ``admin`` only, as ``/status`` and ``/readyz`` do
(``emulator.server.auth.status.message_for_principal``, applied to every error answer by
``emulator.server.errors``)."""

from __future__ import annotations

import pytest

from emulator.model.principal import Principal
from emulator.server.auth.status import HIDDEN, THE_LOG, message_for_principal

EMBEDDED = "embedded:///srv/connect/data/connect-offsets.sqlite3"
KAFKA = "kafka://broker-1.internal:9092,broker-2.internal:9092/connect-offsets"
WRITER = Principal("etl", "token", ("write:c*",))
ADMIN = Principal("ops", "token", ("admin",))
ANONYMOUS_ADMIN = Principal("anonymous", "none", ("admin",))  # authentication off: everyone is admin


@pytest.mark.parametrize(
    ("description", "message", "shown"),
    [
        (  # log_storage_refused
            EMBEDDED,
            f"{EMBEDDED} refused the write: the disk is full (SQLite: database or disk is full); nothing was written",
            f"{THE_LOG} refused the write: the disk is full (SQLite: database or disk is full); nothing was written",
        ),
        (  # log_storage_refused, when the file's mount explains it: the directory alone
            EMBEDDED,
            f"{EMBEDDED} refused the write: the file system holding /srv/connect/data is mounted read-only",
            f"{THE_LOG} refused the write: the file system holding {HIDDEN} is mounted read-only",
        ),
        (  # not_ready while the disk refuses writes
            EMBEDDED,
            f"writes to {EMBEDDED} have been refused for 12.0 s: the disk is full",
            f"writes to {THE_LOG} have been refused for 12.0 s: the disk is full",
        ),
        (  # write_outcome_unknown on Kafka, and a librdkafka text naming a broker
            KAFKA,
            f"{KAFKA}: the write was not acknowledged within 10 s and may still land "
            "(broker-1.internal:9092,broker-2.internal:9092: Connection refused)",
            f"{THE_LOG}: the write was not acknowledged within 10 s and may still land ({HIDDEN}: Connection refused)",
        ),
    ],
)
def test_a_principal_without_admin_reads_the_offsets_log_instead_of_where_it_lives(
    description: str, message: str, shown: str
) -> None:
    assert message_for_principal(message, WRITER, description) == shown


@pytest.mark.parametrize("principal", [ADMIN, ANONYMOUS_ADMIN], ids=["admin", "no-authentication"])
def test_admin_and_everyone_without_authentication_read_the_message_whole(principal: Principal) -> None:
    message = f"{EMBEDDED}: the write timed out waiting for another process's write (SQLite's write lock)"
    assert message_for_principal(message, principal, EMBEDDED) == message


def test_a_log_in_the_root_directory_does_not_hide_every_slash() -> None:
    description = "embedded:///connect-offsets.sqlite3"
    message = f"{description}: the write timed out; nothing was written (a/b)"
    assert (
        message_for_principal(message, WRITER, description)
        == f"{THE_LOG}: the write timed out; nothing was written (a/b)"
    )


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (  # librdkafka's broker names and addresses: the advertised listeners, not the bootstrap list
            "the write failed: 10.0.0.5:9092/1: Connect to ipv4#10.0.0.5:9092 failed: Connection refused",
            f"the write failed: {HIDDEN}: Connect to {HIDDEN} failed: Connection refused",
        ),
        (
            "kafka-0.kafka.svc:9093/bootstrap: Disconnected; [fe80::1]:9092/3: timed out",
            f"{HIDDEN}: Disconnected; {HIDDEN}: timed out",
        ),
        (  # one broker of the bootstrap list, alone
            "broker-2.internal:9092: Connection refused",
            f"{HIDDEN}: Connection refused",
        ),
        (  # a time or a count is no broker
            "refused since 13:50:12 for 3 writes (retry after 2:00)",
            "refused since 13:50:12 for 3 writes (retry after 2:00)",
        ),
    ],
)
def test_a_principal_without_admin_does_not_read_the_brokers_librdkafka_names(message: str, shown: str) -> None:
    assert message_for_principal(message, WRITER, KAFKA) == shown
    assert message_for_principal(message, ADMIN, KAFKA) == message


def test_the_embedded_log_leaves_host_and_port_shapes_alone() -> None:
    """Only a Kafka log's messages carry librdkafka's texts."""
    message = "the write failed: 10.0.0.5:9092/1 is not ours"
    assert message_for_principal(message, WRITER, EMBEDDED) == message
