"""The domain errors: one root, and one class per thing that went wrong.

Every layer below the API raises these and none of them knows HTTP: ``emulator.server.errors``
maps each class to Connect's status and error body in one table. ``kind`` names what happened in
a stable, machine-readable way (the API sends it in a response header, so clients need not read
message texts). ``message`` is the text users see; where Connect has one, it is Connect's own,
kept exactly, because Connect clients and operators match on it.

A subclass inherits its parent's HTTP mapping unless the table names it; the hierarchy therefore
groups errors by what a caller can do about them (fix the request, stop the connector, retry
later, fix the storage).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from emulator.model.records import Position

ERROR_HEADER = "X-Connect-Offsets-Error"
"""The response header that carries an error's ``kind`` (``not_stopped``, ``fenced``, ...), beside
Connect's body ``{error_code, message}``: the daemon sends it, the clients read it."""


class OffsetsError(Exception):
    """Root of every error the emulator reports: the daemon's API, the CLI and the log layer."""

    kind: ClassVar[str] = "internal_error"

    left_no_records: bool = False
    """True when the refused operation put no record into the log, not even one of a transaction it
    then aborted (a ``read_uncommitted`` reader, and Tansu's every reader, still sees those). The
    history's origin registry reads it: a write refused so forgets its registered bytes, while one
    that may have left records keeps them, and a record with those bytes is archived as this daemon's
    ``(unacknowledged)`` (emulator.history.tracked_log). Set by the classes whose every refusal comes
    before any record is handed to the log; an instance raised after that says False (an aborted
    transaction). Unknown, the default, keeps the bytes: only a refusal that is sure forgets them."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# -- the request ------------------------------------------------------------------------------


class InvalidRequest(OffsetsError):
    """The request itself is wrong (body, parameters, ...): sending it again changes nothing."""

    kind = "invalid_request"
    left_no_records = True


class RequestTooLarge(InvalidRequest):
    """The request body exceeds the daemon's ``--max-body-bytes``; it was not read to its end."""

    kind = "request_too_large"


class InvalidRecord(InvalidRequest):
    """Entries handed to a log's ``append`` are not ``(bytes key, bytes-or-None value)`` pairs."""

    kind = "invalid_record"


class WrongConnectorType(InvalidRequest):
    """``kind=source|sink`` contradicts what the Connect cluster's config says the connector is."""

    kind = "wrong_connector_type"


class InvalidOffsetFormat(OffsetsError):
    """A partition or offset map fails Connect's ``OffsetUtils.validateFormat``.

    Connect raises a ``DataException`` inside the worker, which its REST layer answers with 500,
    not 400; kept apart from ``InvalidRequest`` so that the mapping can keep that status.
    """

    kind = "invalid_offset_format"


# -- the connector ----------------------------------------------------------------------------


class ConnectorNotFound(OffsetsError):
    """The connector is unknown (to the Connect cluster, to the offsets log, or to the history)."""

    kind = "connector_not_found"
    history_warning: str | None = None
    """Unknown to the history while the archive may lack records (its archiver stalled or behind):
    why, sent as the ``X-Offsets-History-Warning`` header as the history's answers are."""


class NotStopped(OffsetsError):
    """Offsets may be modified only while the connector is STOPPED with zero tasks (Connect's rule)."""

    kind = "not_stopped"
    left_no_records = True


class ClaimHeld(NotStopped):
    """Someone holds a claim on the connector and the write did not present it: to this writer,
    the connector is as good as running."""

    kind = "claim_held"


class ClaimNotFound(OffsetsError):
    """The connector has no current claim (with that epoch)."""

    kind = "claim_not_found"


class Conflict(OffsetsError):
    """The operation lost to another writer or to the cluster's state; nothing was written."""

    kind = "conflict"
    left_no_records = True


class ConnectorRunning(Conflict):
    """A claim was refused because the connector runs in the Connect cluster (use ``force``)."""

    kind = "connector_running"


class ClaimsUnsupported(Conflict):
    """The log backend cannot store claims."""

    kind = "claims_unsupported"


# -- the daemon and its storage ---------------------------------------------------------------


class BusyWithLargeRequests(OffsetsError):
    """Other large request bodies use the memory the daemon allows them (``--max-body-bytes`` at once,
    ``emulator.server.body_budget``) and this one waited its turn in vain; nothing was read or written."""

    kind = "busy"


class NotReady(OffsetsError):
    """The daemon cannot answer from its log now: answering would return partial state. As such (no
    ``Retry-After``) it may never pass, e.g. a reader that stopped for good; a caller should not wait."""

    kind = "not_ready"


class NotReadyYet(NotReady):
    """Not ready, and it passes by itself: the log (or a connector's own offsets topic) is being read
    to its end, or opened. Same kind, but answered with ``Retry-After``, which is how clients tell it
    from a ``NotReady`` that waiting would not mend."""


class HistoryDisabled(OffsetsError):
    """The daemon runs without its history archive (``--no-history``)."""

    kind = "history_disabled"


class HistoryBehind(OffsetsError):
    """The archive may lack this daemon's latest writes (its archiver is behind, stalled, or another
    process writes it and has not archived them yet), and the request would act on its past state: a
    rollback from it could undo an acknowledged write. Retry later."""

    kind = "history_behind"


class HistoryDamaged(OffsetsError):
    """A rollback would write a past state rebuilt from a damaged archive: records of a damaged block
    were skipped, so the state may be one that never existed. Waiting does not mend it: restore the
    damaged file from a backup, set the offsets by hand, or ask for it anyway (``allow_damaged``)."""

    kind = "history_damaged"


class SinksUnsupported(OffsetsError):
    """Sink offsets live in consumer groups, which only a Kafka backend has."""

    kind = "sinks_unsupported"


class SinkOffsetsFailed(OffsetsError):
    """The consumer-group call behind a sink connector's offsets failed (Connect's 500 texts)."""

    kind = "sink_offsets_failed"


class LogUnavailable(OffsetsError):
    """A log (the offsets topic, Connect's config topic) could not be read to its end in time."""

    kind = "log_unavailable"


class LogConfigError(OffsetsError):
    """The log's storage cannot be used as configured (e.g. a non-compact offsets topic)."""

    kind = "log_config_error"


class TopicMisconfigured(LogConfigError):
    """A topic exists but cannot be used as it is configured (an offsets topic that is not compacted,
    Connect's own check): waiting does not mend it, changing the topic does."""

    kind = "topic_misconfigured"


class ConnectorStoreUnavailable(LogConfigError):
    """A connector's own offsets topic (KIP-618) cannot be served by this daemon, e.g. because the
    connector keeps it on another Kafka cluster."""

    kind = "store_unavailable"


class LogWriteError(OffsetsError):
    """A write was not acknowledged by the log; nothing is reported written unless it was."""

    kind = "log_write_error"


class LogStorageRefused(LogWriteError):
    """The embedded log's storage refused the write (a full disk, an I/O error, a read-only file) and
    nothing was written. Not the request's fault and not permanent: 503 with ``Retry-After``, and
    ``/readyz`` says so until a write succeeds again (``emulator.logs.embedded.storage_faults``)."""

    kind = "log_storage_refused"
    left_no_records = True


class LogTimeout(LogUnavailable):
    """The log did not answer within the request's deadline (``--write-timeout``), and nothing was
    written: the write never started (e.g. it waited behind an earlier write of the same connector
    whose outcome is still unknown), or a fresh read could not reach the log's end. Retry later."""

    kind = "log_timeout"
    left_no_records = True


class WriteOutcomeUnknown(LogUnavailable):
    """The write was handed to the log, which did not acknowledge it within the deadline: it may
    still land. The daemon keeps waiting for the answer in the background and holds the connector's
    next write until then, so a retry with the same commit sequence is applied at most once.

    ``outcome`` (from a log) completes with the records' positions once the log answered, or with
    the error that says they were not written; without it the caller cannot learn the outcome.
    """

    kind = "write_outcome_unknown"

    def __init__(self, message: str, outcome: Future[list[Position]] | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


class WritePartlyApplied(OffsetsError):
    """A write of several chunks (more than 10,000 records go to the log a chunk at a time, each durable
    on its own: ``emulator.service.writer``) that was refused after some of its chunks were written:
    those are in effect, the rest was not written and will not be. Neither "nothing was written"
    (``LogTimeout``, ``LogStorageRefused``, ``Fenced`` say that) nor "it may still land"
    (``WriteOutcomeUnknown``): the message says how many records are in effect. Sending the same
    request again writes the rest once ``cause`` has passed (a PATCH, a DELETE and a rollback write
    absolute values, an import only what differs).

    ``cause`` is what refused the chunk: the answer's status and ``Retry-After`` are its
    (``emulator.server.errors``), since it says what a caller can do (wait for the log or the disk,
    release the claim); the kind says what a caller must know first, that part of the write is in
    effect. Without one, it is answered as a log that did not answer in time."""

    kind = "write_partly_applied"

    def __init__(self, message: str, cause: OffsetsError | None = None) -> None:
        super().__init__(message)
        self.cause = cause


SEND_AGAIN = "sending the same request again"
"""How the daemon's answers say a partly applied write is completed (``partly_written``'s ``again``)."""


def partly_written(error: OffsetsError, written: int, total: int, again: str = SEND_AGAIN) -> WritePartlyApplied:
    """``error``, which refused one chunk of a write, said of the whole write: the chunks before it
    are durable and in effect, so "nothing was written" would be false, and so would ``error``'s kind
    (``log_timeout``, ``log_storage_refused``, ``fenced``… mean nothing was written). The status stays
    that of what went wrong (``WritePartlyApplied.cause``). ``again`` says how the rest gets written:
    the daemon's answers name the request, the CLI's direct writes to a log the command."""
    return WritePartlyApplied(
        f"{error.message.removesuffix('; nothing was written')}; the first {written:,} of this write's {total:,} "
        f"records were written before it and are in effect, the other {total - written:,} were not ({again} "
        "writes the rest)",
        error,
    )


def partly_unknown(message: str, written: int, chunk: int, unwritten: int, again: str = SEND_AGAIN) -> str:
    """``message``, a log's "may still be written" about one chunk of a write, said of the whole
    write: the chunks before it are durable and in effect, the ones after it were never sent."""
    said = (
        f"{message}; the first {written:,} of this write's {written + chunk + unwritten:,} records were written "
        f"before it and are in effect, the next {chunk:,} may still be applied"
    )
    if unwritten:
        said += f", the other {unwritten:,} were not and will not be ({again} writes the rest)"
    return said


# -- who asks ---------------------------------------------------------------------------------


class Unauthenticated(OffsetsError):
    """The request carries no credentials, or credentials the daemon does not accept.

    ``challenges`` are the schemes the daemon accepts (``Basic realm=…``, ``Bearer realm=…``), sent
    back as ``WWW-Authenticate`` so that a browser or a client knows how to authenticate."""

    kind = "unauthenticated"

    def __init__(self, message: str, challenges: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.challenges = challenges


class Forbidden(OffsetsError):
    """The principal is known, but its scopes do not cover this operation on this connector."""

    kind = "forbidden"


class CrossOriginWrite(Forbidden):
    """A write a browser sent from a page of another origin (``Origin`` / ``Sec-Fetch-Site``), or as
    a form submission or navigation: refused whatever its credentials, because a browser attaches
    credentials it remembers to such requests without the user knowing (docs/console.md, "CSRF")."""

    kind = "cross_origin_write"


class UnsupportedMediaType(OffsetsError):
    """A write whose ``Content-Type`` is not ``application/json``: refused before anything is read,
    because a web page can send ``text/plain`` (or no body at all) across origins without a
    preflight, and must never write, claim or roll back through a user's browser."""

    kind = "unsupported_media_type"


class RequestHeadTimeout(InvalidRequest):
    """A connection's request line and headers did not arrive within ``--header-timeout``: the
    connection is answered and closed before any request is read (``emulator.server.connections``)."""

    kind = "request_timeout"


class RequestHeadTooLarge(InvalidRequest):
    """A request's line and headers are longer than the daemon reads (64 KiB,
    ``emulator.server.connections.MAX_HEAD_BYTES``): answered 431 and the connection closed."""

    kind = "request_head_too_large"


class TooManyConnections(OffsetsError):
    """The daemon already has ``--max-connections`` connections open: a new one is answered and
    closed at once, so that file descriptors stay for the log and the history. Retry shortly."""

    kind = "too_many_connections"


class HostNotAllowed(InvalidRequest):
    """The ``Host`` header names no host this daemon serves (``--allowed-hosts``): the usual sign of
    DNS rebinding, where a web page's own host name resolves to the daemon's loopback address."""

    kind = "host_not_allowed"
