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

docs/testing.md, "Test kit for your pipelines", shows them in use.
"""

from emulator.testing.kit import OffsetsKit, unique_name
from emulator.testing.process import DaemonProcess, DaemonStartError, EmbeddedDaemon, KafkaDaemon, wait_until_ready
from emulator.testing.snapshots import LogSnapshot

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
