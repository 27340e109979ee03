"""Typed errors that carry their HTTP status and render Connect's error body.

Connect's REST layer answers every failure as ``{"error_code": <status>, "message": "..."}``
(``ConnectExceptionMapper``); carrying the status on the exception keeps the mapping in one place.
"""

from __future__ import annotations


class EmulatorError(Exception):
    """Base of every error the daemon reports to a client."""

    status: int = 500

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    def body(self) -> dict[str, object]:
        return {"error_code": self.status, "message": self.message}


class BadRequest(EmulatorError):
    status = 400


class NotFound(EmulatorError):
    status = 404


class Conflict(EmulatorError):
    status = 409


class NotReady(EmulatorError):
    """The view has not read to the end of the log yet: answering would return partial state."""

    status = 503


class LogConfigError(EmulatorError):
    """The log's storage cannot be used as configured (e.g. a non-compact offsets topic)."""

    status = 500


class LogWriteError(EmulatorError):
    """A write was not acknowledged by the log."""

    status = 500


class LogReadError(EmulatorError):
    """The log was not read to its end: timed out, the reader stopped, or the end was not known."""

    status = 500
