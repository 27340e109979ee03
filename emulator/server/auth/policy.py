"""Which scope each route needs: one table, checked for every API route by one dependency.

The table is keyed by method and path template. A route the table does not list is refused for
everyone (403), so a new route is closed until someone decides who may use it — and the route
matrix test (``tests/integration/test_auth_matrix.py``) walks the app's routes and fails on it.

Raw records are the one place where the connectors come from the request rather than the path:
``GET /offsets/records`` needs ``read`` on every ``?connector=`` asked for (all of them, unfiltered,
is ``admin``: it includes keys Connect ignores); ``POST /offsets/records`` needs ``write`` on the
connector of every record's key, and ``admin`` for keys that name no connector or for
``allow_malformed``. That is how a Python engine's ``OffsetBackingStore`` works with a token scoped
to its own connector, while a migration of everything through the daemon takes ``admin``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fastapi import Request

from emulator.codec.keys import KeyProblem, parse_key
from emulator.model.errors import Forbidden
from emulator.model.principal import Principal, current_principal
from emulator.server.auth.authenticate import Authenticator
from emulator.server.auth.scopes import Grants, grants_of
from emulator.server.routes.params import read_body
from emulator.service.bodies import parse_records_body

Access = Literal["public", "authenticated", "admin", "any", "connector", "records"]


@dataclass(frozen=True, slots=True)
class Rule:
    """``public``: anyone; ``authenticated``: any known principal; ``admin``; ``any``: ``action``
    on at least one pattern; ``connector``: ``action`` on the path's connector; ``records``: see
    the module docstring."""

    access: Access
    action: str = "read"

    def describe(self) -> str:
        return {
            "public": "anyone, without credentials",
            "authenticated": "any authenticated principal",
            "admin": "admin",
            "any": f"{self.action} on any connector pattern",
            "connector": f"{self.action} on the connector",
            "records": f"{self.action} on the connector of every record (admin: all or malformed keys)",
        }[self.access]


PUBLIC, AUTHENTICATED, ADMIN = Rule("public"), Rule("authenticated"), Rule("admin")
OFFSETS = "/connectors/{connector}/offsets"
CLAIM = "/connectors/{connector}/claim"

RULES: dict[tuple[str, str], Rule] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/status"): AUTHENTICATED,
    ("GET", "/metrics"): ADMIN,
    ("GET", "/history/status"): ADMIN,
    ("GET", "/connectors"): Rule("any", "read"),
    ("GET", OFFSETS): Rule("connector", "read"),
    ("PATCH", OFFSETS): Rule("connector", "write"),
    ("DELETE", OFFSETS): Rule("connector", "write"),
    ("GET", OFFSETS + "/history"): Rule("connector", "read"),
    ("POST", OFFSETS + "/rollback"): Rule("connector", "write"),
    ("GET", CLAIM): Rule("connector", "read"),
    ("POST", CLAIM): Rule("connector", "claim"),
    ("DELETE", CLAIM): Rule("connector", "claim"),
    ("GET", "/claims"): Rule("any", "read"),  # lists only the claims of connectors the principal may read
    ("GET", "/offsets/records"): Rule("records", "read"),
    ("POST", "/offsets/records"): Rule("records", "write"),
    # The console's reads (emulator/server/ui/routes.py); its pages and files are public, like /docs.
    ("GET", "/ui/api/session"): AUTHENTICATED,
    ("GET", "/ui/api/connectors"): Rule("any", "read"),
    ("GET", "/ui/api/connectors/{connector}"): Rule("connector", "read"),
    ("GET", "/ui/api/connectors/{connector}/history"): Rule("connector", "read"),
}
"""(method, path template) → who may call it. ``/metrics`` is listed ahead of its route."""


def rule_for(method: str, path: str) -> Rule | None:
    return RULES.get(("GET" if method == "HEAD" else method, path))


async def enforce(request: Request) -> None:
    """The app-wide dependency: 401 without credentials where the route needs some, 403 outside
    the principal's scopes. Runs before the route's own parameters are read."""
    route = request.scope.get("route")
    # Not getattr(route, "path", request.url.path): its default is built (a URL object) on every request.
    path = route.path if route is not None and hasattr(route, "path") else request.url.path
    rule = rule_for(request.method, path)
    principal = current_principal.get()
    authenticator: Authenticator = request.app.state.authenticator
    if rule is not None and rule.access == "public":
        return
    if authenticator.enabled and principal.mechanism == "none":
        raise authenticator.refused("no credentials")
    if rule is None:
        raise Forbidden(f"{request.method} {path} has no access rule: refused (a bug; see emulator.server.auth.policy)")
    await _check(rule, principal, grants_of(principal.scopes), request)


async def _check(rule: Rule, principal: Principal, grants: Grants, request: Request) -> None:
    if rule.access == "authenticated" or grants.admin:
        return
    if rule.access == "admin":
        raise _forbidden(principal, "needs the admin scope")
    if rule.access == "any":
        if not grants.allows_any(rule.action):
            raise _forbidden(principal, f"needs a {rule.action} scope")
        return
    if rule.access == "connector":
        name = str(request.path_params.get("connector", ""))
        if not grants.allows(rule.action, name):
            raise _forbidden(principal, f"needs {rule.action} on connector {name!r}")
        return
    for connector in await _record_connectors(rule, grants, principal, request):
        if connector is None:
            raise _forbidden(principal, "records whose keys name no connector need the admin scope")
        if not grants.allows(rule.action, connector):
            raise _forbidden(principal, f"needs {rule.action} on connector {connector!r}")


async def _record_connectors(rule: Rule, grants: Grants, principal: Principal, request: Request) -> list[str | None]:
    if rule.action == "read":
        asked = request.query_params.getlist("connector")
        if not asked:
            raise _forbidden(principal, "all raw records need the admin scope (name connectors with ?connector=)")
        return list(asked)
    if not grants.allows_any("write"):
        raise _forbidden(principal, "needs a write scope")
    if request.query_params.get("allow_malformed", "").lower() in ("true", "1", "yes", "on"):
        raise _forbidden(principal, "allow_malformed needs the admin scope")
    connectors: dict[str | None, None] = {}
    body = await read_body(request)  # within --max-body-bytes: a body over it is a 413 before any 403
    for record in parse_records_body(body):
        parsed = parse_key(record.key)
        connectors[None if isinstance(parsed, KeyProblem) else parsed.connector] = None
    return list(connectors)


def _forbidden(principal: Principal, why: str) -> Forbidden:
    return Forbidden(f"{principal.name} ({principal.mechanism}) may not do this: {why}")
