"""Client side: HTTP clients for the daemon (sync and asyncio), the history client, and Connect's
``OffsetBackingStore`` contract served by the daemon (for Python engines)."""

from emulator.client.http import (
    DEFAULT_URL,
    ApiError,
    AsyncOffsetsClient,
    Auth,
    ClientError,
    DaemonUnavailable,
    FencedError,
    NotFoundError,
    NotReadyError,
    NotStoppedError,
    OffsetsClient,
)

__all__ = [
    "DEFAULT_URL",
    "ApiError",
    "AsyncOffsetsClient",
    "Auth",
    "ClientError",
    "DaemonUnavailable",
    "FencedError",
    "NotFoundError",
    "NotReadyError",
    "NotStoppedError",
    "OffsetsClient",
]
