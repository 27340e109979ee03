"""A secured daemon for the authentication tests: Connect's credentials file, hashed tokens and a
scopes file, all written the way an operator writes them (tokens through ``token mint``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from emulator.server.auth import tokens
from tests.fixtures.daemon import DaemonProcess

PASSWORDS = {"alice": "s3cret:with colon", "bob": "bob-pw", "carol": "carol-pw"}
"""Basic users of the credentials file; alice is admin, bob reads orders-*, carol is listed nowhere."""
SCOPES = {"alice": ["admin"], "bob": ["read:orders-*"]}
TOKEN_SCOPES = {"writer": ["write:orders-*"], "claimer": ["claim:orders-*"], "other": ["write:other-*"]}


def cli(*args: str, env: Mapping[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``connect-offsets`` with no ``CONNECT_OFFSETS_*`` variable but those given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args],
        env={**clean, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def mint(name: str, scopes: Sequence[str]) -> tuple[str, str]:
    """(token, tokens-file line), as ``connect-offsets token mint`` makes them (that command's own
    test runs it; here the same functions save a process start per token)."""
    token = tokens.mint()
    return token, tokens.token_line(name, token, scopes)


@dataclass
class SecurityFiles:
    directory: Path
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def credentials(self) -> Path:
        return self.directory / "connect-credentials.properties"

    @property
    def tokens_file(self) -> Path:
        return self.directory / "tokens"

    @property
    def scopes(self) -> Path:
        return self.directory / "scopes.toml"

    def serve_args(self) -> list[str]:
        return [
            "--credentials-file",
            str(self.credentials),
            "--tokens-file",
            str(self.tokens_file),
            "--scopes-file",
            str(self.scopes),
        ]


def write_security_files(directory: Path) -> SecurityFiles:
    directory.mkdir(parents=True, exist_ok=True)
    files = SecurityFiles(directory)
    # Properties syntax as Connect reads it: ':' in a password needs no escape after the separator
    files.credentials.write_text("# Connect's basic-auth users\n" + "".join(f"{u}={p}\n" for u, p in PASSWORDS.items()))
    lines = []
    for name, scopes in TOKEN_SCOPES.items():
        files.tokens[name], line = mint(name, scopes)
        lines.append(line)
    files.tokens_file.write_text("\n".join(lines) + "\n")
    files.scopes.write_text("[scopes]\n" + "".join(f"{u} = {json.dumps(s)}\n" for u, s in SCOPES.items()))
    return files


def basic(user: str) -> httpx.BasicAuth:
    return httpx.BasicAuth(user, PASSWORDS[user])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def audit_line_of(daemon: DaemonProcess, connector: str) -> str:
    """The daemon's latest audit line naming ``connector``, waited for (the line follows the answer)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for line in daemon.log_tail().splitlines() if "emulator.audit" in line and connector in line]
        if lines:
            return lines[-1]
        time.sleep(0.05)
    raise AssertionError(f"no audit line for {connector}")
