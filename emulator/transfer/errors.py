"""Why a transfer did not happen; both are raised before anything is written."""

from __future__ import annotations


class LocationError(ValueError):
    """A location string that names no usable place (bad syntax, missing source)."""


class TransferError(ValueError):
    """The transfer was refused before anything was written (e.g. keys Connect ignores)."""
