"""Client side: HTTP clients for the daemon (sync and asyncio), the history client, and Connect's
``OffsetBackingStore`` contract served by the daemon (for Python engines)."""

from emulator.client.credentials import Credentials
from emulator.client.errors import (
    AnswerLost,
    ApiError,
    AuthenticationError,
    ClientError,
    DaemonUnavailable,
    FencedError,
    ForbiddenError,
    NotFoundError,
    NotReadyError,
    NotStoppedError,
    UnknownRouteError,
)
from emulator.client.http import DEFAULT_URL, AsyncOffsetsClient, Auth, OffsetsClient

__all__ = [
    "DEFAULT_URL",
    "AnswerLost",
    "ApiError",
    "AsyncOffsetsClient",
    "Auth",
    "AuthenticationError",
    "ClientError",
    "Credentials",
    "DaemonUnavailable",
    "FencedError",
    "ForbiddenError",
    "NotFoundError",
    "NotReadyError",
    "NotStoppedError",
    "OffsetsClient",
    "UnknownRouteError",
]
