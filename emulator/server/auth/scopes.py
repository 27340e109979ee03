"""What a principal may do: ``read``, ``write``, ``claim`` and ``admin``, each on connector names
matching a pattern, the way namespace ownership works in ns4kafka (a team owns ``orders-*``).

A scope is written ``ACTION`` or ``ACTION:PATTERN``; the pattern is a shell glob over connector
names (``*``, ``?``, ``[…]``; ``orders-*`` is a prefix), ``*`` when left out:

======== ===================================================================================
read     GET a connector's offsets, history and claim
write    PATCH and DELETE its offsets, roll it back, import records for it; implies ``read``
claim    take and release its claim; implies ``read`` (writing with the claim needs ``write``)
admin    everything: raw records of every connector, file paths in ``/status``, the history
         archiver's status, migrations through the daemon; takes no pattern
======== ===================================================================================
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

ACTIONS = ("read", "write", "claim", "admin")
IMPLIES = {"read": ("read",), "write": ("write", "read"), "claim": ("claim", "read"), "admin": ACTIONS}
"""What holding an action grants."""


class ScopeError(ValueError):
    """A scope that is not ``ACTION`` or ``ACTION:PATTERN``."""


@dataclass(frozen=True, slots=True)
class Grant:
    action: str
    pattern: str = "*"

    def covers(self, action: str, connector: str) -> bool:
        return action in IMPLIES[self.action] and fnmatch.fnmatchcase(connector, self.pattern)


def parse_scope(text: str) -> Grant:
    action, sep, pattern = text.strip().partition(":")
    if action not in ACTIONS:
        raise ScopeError(f"unknown scope {text!r}: expected one of {', '.join(ACTIONS)}, optionally :PATTERN")
    if action == "admin" and sep:
        raise ScopeError(f"scope {text!r}: admin covers every connector and takes no pattern")
    if sep and not pattern:
        raise ScopeError(f"scope {text!r}: empty pattern (leave ':' out for every connector)")
    return Grant(action, pattern or "*")


def parse_scopes(texts: Iterable[str]) -> tuple[str, ...]:
    """Checked and normalised (``write`` → ``write:*``): what a ``Principal`` carries."""
    return tuple(_text(parse_scope(t)) for t in texts if t.strip())


def _text(grant: Grant) -> str:
    return grant.action if grant.action == "admin" else f"{grant.action}:{grant.pattern}"


@dataclass(frozen=True, slots=True)
class Grants:
    """A principal's scopes, ready to ask."""

    grants: tuple[Grant, ...]

    def allows(self, action: str, connector: str) -> bool:
        return any(g.covers(action, connector) for g in self.grants)

    def allows_any(self, action: str) -> bool:
        """Holds ``action`` on at least one pattern (e.g. may list connectors)."""
        return any(action in IMPLIES[g.action] for g in self.grants)

    @property
    def admin(self) -> bool:
        return any(g.action == "admin" for g in self.grants)


@lru_cache(maxsize=1024)
def grants_of(scopes: tuple[str, ...]) -> Grants:
    """Parsed once per distinct scope tuple (principals' scopes were checked when loaded)."""
    return Grants(tuple(parse_scope(s) for s in scopes))
