"""Who is making the current request: the principal the audit trail, the access log and the scope
checks all speak of.

Kept in the model (not in the server) because the layers below the API record it too: the history
archive stores who wrote a record, and the service logs one audit line per write. They read it from
``current_principal`` instead of taking it as a parameter through every call, the same way the
history archive learns a write's operation (``emulator.history.origins.write_origin``).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

ANONYMOUS_NAME = "anonymous"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated identity, or the anonymous one when authentication is off.

    ``mechanism`` says how it was established (``none``, ``basic``, ``token``, ``mtls``); ``scopes``
    are what it may do (filled by the authenticator); ``remote`` is the client's address as the
    server saw it (``host:port``), or None outside a request.
    """

    name: str = ANONYMOUS_NAME
    mechanism: str = "none"
    scopes: tuple[str, ...] = field(default_factory=tuple)
    remote: str | None = None


ANONYMOUS = Principal()

current_principal: ContextVar[Principal] = ContextVar("current_principal", default=ANONYMOUS)
"""Set per request by the server (authentication middleware); read by audit, access log and history."""
