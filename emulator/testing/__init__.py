"""A test kit for pipelines that use Kafka Connect's offsets: seed them before a test, check what a
connector or a Spark job committed after it.

- ``EmbeddedDaemon`` / ``KafkaDaemon`` (``process``): a ``connect-offsets serve`` process, as a
  context manager, for any test framework: ``with EmbeddedDaemon() as daemon: daemon.url``.
- ``OffsetsKit`` (``kit``): the helpers (``seed``, ``offsets``, ``history``, ``wait_for_offset``,
  ``assert_offsets``, ``snapshot``/``restore``, ``unique_name``).
- ``plugin``: the same as pytest fixtures, registered through the ``pytest11`` entry point
  (``connect_offsets`` and friends); importing this package does not import pytest.
- ``compose``: the compose file for a Kafka + Connect + daemon stack, and its daemon's URL under
  pytest-docker.

The names below are imported on first use: pytest imports the plugin (and so this package) in
every session of every project that has the package installed, and a session that uses no kit
should not pay for the HTTP client's imports. docs/testing.md, "Test kit for your pipelines",
shows them in use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.testing.kit import OffsetsKit, unique_name
    from emulator.testing.process import DaemonProcess, DaemonStartError, EmbeddedDaemon, KafkaDaemon, wait_until_ready
    from emulator.testing.snapshots import LogSnapshot

_HOMES = {
    "DaemonProcess": "process",
    "DaemonStartError": "process",
    "EmbeddedDaemon": "process",
    "KafkaDaemon": "process",
    "wait_until_ready": "process",
    "OffsetsKit": "kit",
    "unique_name": "kit",
    "LogSnapshot": "snapshots",
}

__all__ = [
    "DaemonProcess",
    "DaemonStartError",
    "EmbeddedDaemon",
    "KafkaDaemon",
    "LogSnapshot",
    "OffsetsKit",
    "unique_name",
    "wait_until_ready",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
