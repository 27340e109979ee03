"""Which ``Host`` headers a port serves (against DNS rebinding), for the API (``guards.HostGuard``)
and the metrics port alike; no web framework, so the metrics port's thread server uses it too.

A web page can make a browser send requests to the daemon's address through a host name the
page's author controls (DNS rebinding); the browser then sends that name as ``Host``. An IP
address cannot be rebound, so ``ip_literals`` accepts any.

HTTP/1.1 requires ``Host`` (RFC 9112, section 3.2: a request without one is answered 400); an
HTTP/1.0 request may lack it, and is served without one only where any host is (``*``): otherwise
leaving the header out would skip the check.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass


def host_of(header: str) -> str | None:
    """``Host`` without its port, in lower case; IPv6 literals lose their brackets. None when the
    value is not ``host[:port]`` with a port of digits (RFC 9110, section 7.2): ``:48100.evil.com``
    or ``:evil`` is no port, and checking only the part before the colon served
    ``localhost:48100.evil.com`` as ``localhost``. None too for a comma, which no host name holds
    and which is how a server that joins repeated headers (the metrics port's ``wsgiref``) shows
    two ``Host`` lines. An IPv6 address without brackets (``::1``) is taken whole: it has no port."""
    header = header.strip().lower()
    if "," in header:
        return None
    if header.startswith("["):
        host, bracket, rest = header[1:].partition("]")
        if not bracket or not is_ip_literal(host):
            return None
    elif header.count(":") > 1:
        return header if is_ip_literal(header) else None
    else:
        host, colon, port = header.partition(":")
        rest = colon + port
    port = rest[1:]
    if rest and not (rest[0] == ":" and (not port or (port.isascii() and port.isdigit()))):  # port = *DIGIT
        return None
    return host


def is_ip_literal(host: str) -> bool:
    """An IPv4 or IPv6 address (``host_of``'s result), not a name: no DNS answer can rebind it."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HostRule:
    """``allowed``: host names or globs (``*.example.com``); ``*`` allows any. ``ip_literals``: also
    any IP address."""

    allowed: tuple[str, ...]
    ip_literals: bool = False

    @classmethod
    def of(cls, allowed: Sequence[str], ip_literals: bool = False) -> HostRule:
        return cls(tuple(a.strip().lower().strip("[]") for a in allowed if a.strip()), ip_literals)

    @property
    def any_host(self) -> bool:
        return "*" in self.allowed

    def refusal_of_all(self, headers: Sequence[str], http_version: str) -> str | None:
        """``refusal`` for every ``Host`` line of a request: more than one is refused, whatever
        they say (RFC 9112, section 3.2), as the guards after this one could read another line
        than the one checked here (``ui.csrf`` reads the last)."""
        if len(headers) > 1:
            return f"a request with {len(headers)} Host headers is not served: HTTP allows one (RFC 9112)"
        return self.refusal(headers[0] if headers else None, http_version)

    def refusal(self, header: str | None, http_version: str) -> str | None:
        """None when a request with this ``Host`` (None: without one) is served; else why not.
        A value that is not ``host[:port]`` is refused wherever any host is served too (RFC 9112,
        section 3.2: an invalid ``Host`` is answered 400)."""
        if header is None:
            if http_version not in ("1.0", "0.9"):
                return f"HTTP/{http_version} requires a Host header (RFC 9112)"
            if self.any_host:
                return None
            return f"a request without a Host header is not served here (allowed: {self.describe()})"
        host = host_of(header)
        if host is None:
            return f"Host {header[:100]!r} is not a host name or address with an optional port of digits"
        if any(fnmatch.fnmatchcase(host, a) for a in self.allowed) or (self.ip_literals and is_ip_literal(host)):
            return None
        return f"Host {header[:100]!r} is not served here (allowed: {self.describe()}; see --allowed-hosts)"

    def describe(self) -> str:
        return ", ".join((*(("IP addresses",) if self.ip_literals else ()), *self.allowed))
