"""Helpers for running sample user test files through the installed plugin, in a subprocess.

``runpytest_subprocess`` starts ``python -m pytest`` as a user's CI would: the plugin is loaded
through its ``pytest11`` entry point, not imported by these tests, so the registration itself is
under test. The inner run gets a clean ``CONNECT_OFFSETS_*`` environment unless a test sets one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.docker.conftest import compose_command, docker_engine  # noqa: F401  (fixtures for test_compose.py)

INNER_TIMEOUT_S = 240.0


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """``pytester`` with the daemon's and the kit's variables cleared for the inner run."""
    for name in list(os.environ):
        if name.startswith("CONNECT_OFFSETS_"):
            monkeypatch.delenv(name)
    return pytester


# Plugins of this suite's own dependencies that a user's repository has no reason to load: together
# they took 3 of the 3.7 s an inner pytest spent before collecting (hypothesis and schemathesis are
# imported by their entry points), in each of the ~25 inner runs.
NOT_THE_USERS = ("-p", "no:schemathesis", "-p", "no:hypothesispytest")


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *NOT_THE_USERS, "-rA", *args, timeout=INNER_TIMEOUT_S
    )


def exited(pid: int, within_s: float = 0.0) -> bool:
    """Whether the process (not necessarily a child of this one) has closed its files (so released
    its locks): it is gone, or a zombie whose other threads are gone too (its main thread shows as a
    zombie while the others are still exiting, holding the files). Waits up to ``within_s`` for it."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            gone = state == "Z" and os.listdir(f"/proc/{pid}/task") == [str(pid)]
        except FileNotFoundError:
            gone = True
        if gone or time.monotonic() >= deadline:
            return gone
        time.sleep(0.05)
