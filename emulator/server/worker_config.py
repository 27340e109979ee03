"""Exactly-once source support as the daemon applies it: from its flags, or a Connect worker's file.

A Connect cluster's ``exactly.once.source.support`` and ``group.id`` live in its workers' properties
file, not in any topic the daemon reads, so the daemon is told: by ``--exactly-once-source`` and
``--connect-group-id``, or by ``--worker-config`` pointing at the workers' own file (read as
``ConnectDistributed`` reads it, ``java.util.Properties`` syntax). A flag wins over the file.
"""

from __future__ import annotations

import logging
from pathlib import Path

from emulator.model.exactly_once import DISABLED, SUPPORT_VALUES, ExactlyOnceSource
from emulator.server.auth.properties import PropertiesError, parse_properties
from emulator.server.options import SettingsError
from emulator.server.settings import Settings

log = logging.getLogger(__name__)


def read_worker_config(path: Path) -> dict[str, str]:
    """A worker's properties (``SettingsError`` naming the file when it cannot be read)."""
    try:
        return parse_properties(path.read_bytes())
    except OSError as exc:
        raise SettingsError(f"--worker-config {path}: cannot be read: {exc.strerror or exc}") from None
    except PropertiesError as exc:
        raise SettingsError(f"--worker-config {path}: {exc}") from None


def exactly_once_source(settings: Settings) -> ExactlyOnceSource:
    """The cluster's exactly-once source support and group id, checked: ``enabled`` needs a group id."""
    worker = {} if settings.worker_config is None else read_worker_config(settings.worker_config)
    if worker:
        _compare_topics(settings, worker)
    support_text = settings.exactly_once_source or worker.get("exactly.once.source.support", "disabled").strip()
    support = support_text.lower()
    if support not in SUPPORT_VALUES:
        raise SettingsError(
            f"--worker-config {settings.worker_config}: exactly.once.source.support={support_text!r} is not one of "
            f"{', '.join(SUPPORT_VALUES)}"
        )
    group_id = settings.connect_group_id or (worker.get("group.id", "").strip() or None)
    eos = ExactlyOnceSource(support, group_id)
    if eos == DISABLED or not eos.enabled:
        return eos
    if group_id is None:
        raise SettingsError(
            "exactly-once source support needs the Connect workers' group.id (task transactional ids are "
            "<group.id>-<connector>-<task>): give --connect-group-id, or --worker-config with group.id"
        )
    return eos


def _compare_topics(settings: Settings, worker: dict[str, str]) -> None:
    """A worker file of another cluster is almost certainly a mistake: say so (the flags still decide)."""
    for key, ours, flag in (
        ("offset.storage.topic", settings.offsets_topic, "--offsets-topic"),
        ("config.storage.topic", settings.config_topic, "--config-topic"),
    ):
        theirs = worker.get(key, "").strip()
        if theirs and ours is not None and theirs != ours:
            log.warning(
                "--worker-config %s says %s=%s but %s is %s; the daemon follows %s",
                settings.worker_config,
                key,
                theirs,
                flag,
                ours,
                flag,
            )
