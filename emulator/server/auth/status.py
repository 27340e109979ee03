"""What ``/status`` and ``/readyz`` show to whom: server file paths and raw error texts (which name
files and hosts) only to ``admin``; everyone who may see ``/status`` sees the security settings,
including the ``--insecure-no-auth`` warning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.model.principal import Principal
from emulator.server.auth.scopes import grants_of

HIDDEN = "(shown to the admin scope only)"
DETAIL_KEYS = frozenset(
    {"log", "error", "last_error", "directory", "failure", "path", "data_dir", "recovered_files", "unreachable"}
)
"""Keys whose values may name files, directories or hosts, at any depth."""


def for_principal(body: Mapping[str, Any], principal: Principal) -> dict[str, Any]:
    if grants_of(principal.scopes).admin:
        return dict(body)
    return _redact(body)


def _redact(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in DETAIL_KEYS and value is not None:
            out[key] = HIDDEN
        elif isinstance(value, Mapping):
            out[key] = _redact(value)
        else:
            out[key] = value
    return out
