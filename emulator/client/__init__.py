"""Client side: HTTP clients for the daemon (sync and asyncio), the history client, and Connect's
``OffsetBackingStore`` contract served by the daemon (for Python engines).

The names below are loaded when first asked for (``from emulator.client import OffsetsClient``
works as before): importing any module of this package runs this file, and the daemon's own start
(``connect-offsets serve``, through the CLI's shared settings and errors) imports
``emulator.client.credentials`` and ``emulator.client.errors`` but never the HTTP client, whose
import (httpx) cost every start 0.1–0.2 s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.client.credentials import Credentials
    from emulator.client.errors import (
        AnswerLost,
        ApiError,
        AuthenticationError,
        ClientConfigError,
        ClientError,
        DaemonUnavailable,
        FencedError,
        ForbiddenError,
        NotFoundError,
        NotReadyError,
        NotStoppedError,
        UnaddressableConnector,
        UnknownRouteError,
    )
    from emulator.client.http import DEFAULT_URL, AsyncOffsetsClient, Auth, OffsetsClient

_MODULE_OF = {
    "Credentials": "emulator.client.credentials",
    **dict.fromkeys(
        (
            "AnswerLost",
            "ApiError",
            "AuthenticationError",
            "ClientConfigError",
            "ClientError",
            "DaemonUnavailable",
            "FencedError",
            "ForbiddenError",
            "NotFoundError",
            "NotReadyError",
            "NotStoppedError",
            "UnaddressableConnector",
            "UnknownRouteError",
        ),
        "emulator.client.errors",
    ),
    **dict.fromkeys(("DEFAULT_URL", "AsyncOffsetsClient", "Auth", "OffsetsClient"), "emulator.client.http"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "DEFAULT_URL",
    "AnswerLost",
    "ApiError",
    "AsyncOffsetsClient",
    "Auth",
    "AuthenticationError",
    "ClientConfigError",
    "ClientError",
    "Credentials",
    "DaemonUnavailable",
    "FencedError",
    "ForbiddenError",
    "NotFoundError",
    "NotReadyError",
    "NotStoppedError",
    "OffsetsClient",
    "UnaddressableConnector",
    "UnknownRouteError",
]
