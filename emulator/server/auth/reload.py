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
