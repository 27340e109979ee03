"""Bearer tokens for services (Spark jobs, CI): minted once, stored only as a hash.

A token is 32 random bytes (``cot_`` + URL-safe base64); the tokens file keeps its SHA-256, not
the token. A fast hash is enough here, unlike for passwords: nobody can guess through 2^256
candidates, and a slow hash (scrypt, bcrypt) would cost milliseconds of CPU on every request.
A presented token is hashed and compared with every stored hash in constant time, so neither
the comparison nor which line matched shows in the answer's timing.

The file has one line per token, ``NAME:sha256$HEX:SCOPE SCOPE …`` (``#`` starts a comment)::

    spark-orders:sha256$5f0c…:write:orders-* claim:orders-*
    ci:sha256$9a1b…:read

``connect-offsets token mint NAME --scope …`` prints a new token and its line.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from emulator.server.auth.scopes import ScopeError, parse_scopes

PREFIX = "cot_"
ALGORITHM = "sha256"


class TokensFileError(ValueError):
    """A line of the tokens file that cannot be used; the message names the line."""


@dataclass(frozen=True, slots=True)
class StoredToken:
    name: str
    digest: bytes
    scopes: tuple[str, ...]


def mint() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_line(name: str, token: str, scopes: Sequence[str]) -> str:
    """The tokens-file line for ``token`` (checked the way the daemon will read it)."""
    _check_name(name, "the token's name")
    for scope in scopes:
        if scope != "".join(scope.split()):  # the file separates scopes with spaces: "write:x y" is two
            raise ScopeError(f"scope {scope!r} holds a space: give each scope its own --scope")
    line = f"{name}:{ALGORITHM}${digest(token).hex()}:{' '.join(parse_scopes(scopes))}"
    parse_tokens_file(line)
    return line


def parse_tokens_file(text: str, skipped: list[tuple[int, str]] | None = None) -> list[StoredToken]:
    """The tokens of a file's text. A bad line raises ``TokensFileError``; with ``skipped`` given,
    it is left out instead and (line number, why) appended there (the daemon's reload: the good
    lines apply, so removing a line revokes its token even while another line has a typo). A
    second line with a name already seen is bad: the first stays."""
    tokens: list[StoredToken] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            stored = _parse_line(line)
            if stored.name in names:
                raise TokensFileError(f"a second token named {stored.name!r}")
        except (TokensFileError, ScopeError) as exc:
            if skipped is None:
                raise TokensFileError(f"line {number}: {exc}") from None
            skipped.append((number, str(exc)))
            continue
        names.add(stored.name)
        tokens.append(stored)
    return tokens


def _parse_line(line: str) -> StoredToken:
    name, sep, rest = line.partition(":")
    hashed, sep2, scopes = rest.partition(":")
    if not sep or not sep2:
        raise TokensFileError("expected NAME:sha256$HEX:SCOPES")
    _check_name(name, "name")
    algorithm, _, hex_digest = hashed.partition("$")
    if algorithm != ALGORITHM:
        raise TokensFileError(f"unknown hash {algorithm!r} (expected {ALGORITHM}$HEX)")
    try:
        raw = bytes.fromhex(hex_digest)
    except ValueError:
        raise TokensFileError("the hash is not hexadecimal") from None
    if len(raw) != hashlib.sha256().digest_size:
        raise TokensFileError("the hash is not a SHA-256 digest (64 hex digits)")
    return StoredToken(name, raw, parse_scopes(scopes.split()))


def _check_name(name: str, what: str) -> None:
    if not name or name != name.strip() or ":" in name or any(c.isspace() for c in name):
        raise TokensFileError(f"{what} {name!r} must be non-empty, without ':' or blanks")
    if name.startswith("#"):  # its line would be a comment: the token minted for it never accepted
        raise TokensFileError(
            f"{what} {name!r} must not start with '#': the tokens file reads such a line as a comment"
        )


def find(tokens: Sequence[StoredToken], presented: str) -> StoredToken | None:
    """The stored token ``presented`` hashes to; every entry is compared, in constant time."""
    wanted = digest(presented)
    found: StoredToken | None = None
    for stored in tokens:
        if hmac.compare_digest(stored.digest, wanted):
            found = stored
    return found
