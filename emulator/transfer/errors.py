"""Why a transfer did not happen: raised before anything is written, except ``OutputIncomplete``."""

from __future__ import annotations


class LocationError(ValueError):
    """A location string that names no usable place (bad syntax, missing source)."""


class TransferError(ValueError):
    """The transfer was refused before anything was written (e.g. keys Connect ignores)."""


class OutputIncomplete(LocationError):
    """Standard output (``KIND:-``) refused the file: ``sent`` of ``total`` bytes had gone to it. Not
    bad input: the CLI answers it as every command answers an output it could not write (exit 74)."""

    def __init__(self, message: str, sent: int, total: int) -> None:
        super().__init__(message)
        self.sent = sent
        self.total = total


class TransferInterrupted(KeyboardInterrupt):
    """Ctrl-C during a transfer, with what it knows of the destination. ``detail`` completes
    "interrupted: `import` …" (how many records were written and are in effect, which may still land,
    which were not sent); ``nothing_written``: it came before anything was sent to or written at the
    destination (reading the source, planning), so nothing was changed."""

    def __init__(self, detail: str = "", nothing_written: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.nothing_written = nothing_written
