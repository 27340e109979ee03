"""``compact``: keep only the latest record of each key in an embedded log, as Kafka's cleaner does.

A daemon compacts the log it serves by itself (``--compaction-interval``). This is for a log no
daemon serves: a ``migrate`` destination, a copy, a log whose daemon runs with
``--compaction-interval never``. Beside a running daemon it is safe for the log (each step is a
SQLite transaction) but not for that daemon's history: it may remove a change the daemon has not
read or archived yet, which a daemon's own compaction never does. So it refuses while a daemon
writes the log's history archive (under --history-dir, default <data-dir>/history), unless --force.
With no daemon running, it keeps what that archive has not archived yet (a daemon stopped by a crash
before its archiver caught up): the next daemon archives those records when it reads the log.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.cli.common import EXIT_OK, EXIT_REFUSED, UsageError, out, say
from emulator.model.errors import OffsetsError
from emulator.server.options import SettingsError, add_options, shared
from emulator.server.settings import Settings


@dataclass(frozen=True, slots=True)
class CompactSettings:
    """The settings ``compact`` shares with ``serve``, declared as ``serve`` declares them (same flags,
    ``CONNECT_OFFSETS_*`` variables and defaults): a daemon's environment names its log for both. The
    command had flags of its own, which ignored ``CONNECT_OFFSETS_DATA_DIR`` and compacted ./data."""

    data_dir: Path = shared(Settings, "data_dir")
    offsets_topic: str = shared(Settings, "offsets_topic")
    history_dir: Path | None = shared(Settings, "history_dir")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compact",
        help="compact an embedded log: keep the latest record of each key (a daemon does it by itself)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(p, CompactSettings)
    p.add_argument(
        "--name",
        dest="offsets_topic",
        default=None,
        help="the same as --offsets-topic: the log's name (its file is <data-dir>/<name>.sqlite3)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="compact even while a daemon archives this log (its history may miss changes it has not read yet)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from emulator.history.adoption import locate
    from emulator.history.directory import written_by_a_live_process
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
    from emulator.logs.embedded.storage import stored_log_id, stored_partition_count

    settings: CompactSettings = args.settings
    path = settings.data_dir / f"{settings.offsets_topic}.sqlite3"
    if not path.is_file():
        # A SettingsError: the command line adds the variable a value came from (CONNECT_OFFSETS_DATA_DIR)
        raise SettingsError(f"no embedded log at {path} (--data-dir, --offsets-topic)")
    partitions = stored_partition_count(path)
    if partitions is None:
        raise UsageError(f"{path} is not an embedded offsets log that can be read")
    log = EmbeddedOffsetLog(settings.data_dir, partitions=partitions, name=settings.offsets_topic)
    root = settings.history_dir or settings.data_dir / "history"

    def refuse_if_archived_by_a_daemon(identity: str) -> Path:
        history = locate(root, identity, log.description)
        if not args.force and written_by_a_live_process(history):
            raise UsageError(
                f"a running daemon archives {log.description} (its history is {history}); it compacts the log "
                "itself, behind what it has archived. Compacting now could remove changes it has not read yet "
                "(--force to compact anyway)"
            )
        return history

    # Asked before opening too: opening waits for SQLite's write lock, which a tool of another process
    # may hold for long, and the refusal needs only the log's id, read without that lock.
    stored_id = stored_log_id(path)
    if stored_id is not None:
        refuse_if_archived_by_a_daemon(f"embedded-log:{stored_id}")
    try:
        log.open()  # the archive is named after the id the log's file stores (stored at the first open)
        history = refuse_if_archived_by_a_daemon(log.archive_identity)
        archived = None if args.force else _archived_below(history, (log.archive_identity, log.description))
        report = log.compact(below=None if archived is None else lambda p: archived.get(p, 0))
        # The archive lacks records only where the log reaches past what it archived.
        unarchived = archived is not None and any(
            end > archived.get(p, 0) for p, end in log.end_offsets(timeout_s=30.0).items()
        )
    except OffsetsError as exc:
        say("error", exc.message)
        return EXIT_REFUSED
    finally:
        log.close()
    out(
        f"{log.description}: {report.records_before:,} -> {report.records_after:,} records "
        f"({report.removed:,} removed) in {report.duration_s:.2f} s"
    )
    if unarchived:
        out(
            f"kept every record its history archive ({history}) has not archived yet: the next daemon "
            "archives them, then compacts them itself (--force removes them unarchived)"
        )
    return EXIT_OK


def _archived_below(history: Path, identities: tuple[str, str]) -> dict[int, int] | None:
    """Per partition, the offset from which the archive has archived nothing yet (as its state file
    last recorded it: the archive may hold more, never less); None when the log has no archive. Its
    state names the log by ``archive_identity``, or by ``description`` in a directory an earlier
    version named and no daemon of this version has opened yet."""
    from emulator.history.state import NewerArchive, load_state

    if not history.is_dir():
        return None
    identity, description = identities
    try:
        try:
            state = load_state(history, identity)
        except NewerArchive:
            raise
        except ValueError:
            state = load_state(history, description)
    except NewerArchive as exc:
        raise UsageError(
            f"{exc}; compact with that version, or --force to compact without regard to the history"
        ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot tell what the history archive at {history} holds ({exc}): start a daemon on the log once "
            "(it rebuilds the archive's state), or --force to compact without regard to the history"
        ) from exc
    return {} if state is None else dict(state.next_offsets)
