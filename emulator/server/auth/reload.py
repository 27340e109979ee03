"""Credentials reload without a restart: on SIGHUP at once, and when a file changes (polled).

Both run the reading in a worker thread: the files are small, but the event loop never waits on
a disk. A reload fails closed: what the files now list is in force, bad lines left out
(``CredentialStore.reload``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from emulator.server.auth.credentials import CredentialStore

log = logging.getLogger(__name__)

POLL_S = 2.0


async def watch(store: CredentialStore, every_s: float = POLL_S) -> None:
    """Reload whenever a file's size, modification time or inode changed; runs until cancelled."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await asyncio.to_thread(store.reload_if_changed)
        except Exception:  # the watcher must outlive any surprise; the store logs its own errors
            log.exception("checking the credential files failed")


def sighup_before_serving(store: CredentialStore | None) -> None:
    """Make SIGHUP harmless from the start: its default action ends the process (exit 129, no
    shutdown, no word in the log), and a supervisor's reload (``ExecReload=kill -HUP $MAINPID``)
    sent to a daemon without credential files, or one still opening its storage, stopped it.
    ``on_sighup`` takes over once the app serves with credential files; until then, or for good
    without them, a SIGHUP is logged and changes nothing (a file changed meanwhile is read again
    by the watcher once serving starts: it compares with what was read at startup)."""

    def logged(_signum: int, _frame: object) -> None:
        if store is None:
            log.info(
                "SIGHUP: nothing to reload (no --tokens-file, --credentials-file or --scopes-file); the daemon goes on"
            )
        else:
            log.info("SIGHUP before the daemon serves: the credential files are read again once it does, if changed")

    with contextlib.suppress(ValueError):  # not the main thread (an embedding application's): left as it is
        signal.signal(signal.SIGHUP, logged)


def on_sighup(store: CredentialStore) -> bool:
    """Reload on SIGHUP; False where the loop cannot take signal handlers (not the main thread)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[bool]] = set()

    def reload() -> None:
        log.info("SIGHUP: reloading credentials")
        task = loop.create_task(asyncio.to_thread(store.reload))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGHUP, reload)
        return True
    return False
