"""Sink or source, decided from a connector's config alone (a heuristic: we load no plugins).

Connect decides by instantiating ``connector.class`` (``ConnectUtils.isSinkConnector``). Without the
plugin we rely on what Connect enforces and what connector authors name things:

1. Every sink must set ``topics`` or ``topics.regex`` (``SinkConnectorConfig.validate`` rejects it
   otherwise), so a config without both is a source.
2. A few sources also have a ``topics`` setting, notably MirrorMaker 2's connectors; the class name
   settles those: a simple name ending in ``SourceConnector``/``Source`` or a class in
   ``org.apache.kafka.connect.mirror`` is a source, one ending in ``SinkConnector``/``Sink`` a sink.
3. Otherwise a config with ``topics``/``topics.regex`` is a sink.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.model.connectors import ConnectorKind

_MIRROR_PACKAGE = "org.apache.kafka.connect.mirror."


def connector_kind(config: Mapping[str, Any]) -> ConnectorKind:
    raw_class = config.get("connector.class")
    class_name = raw_class.strip() if isinstance(raw_class, str) else ""
    simple = class_name.rsplit(".", 1)[-1]
    if class_name.startswith(_MIRROR_PACKAGE) or simple.startswith("Mirror"):
        return "source"
    if simple.endswith(("SourceConnector", "Source")):
        return "source"
    if simple.endswith(("SinkConnector", "Sink")):
        return "sink"
    return "sink" if _set(config.get("topics")) or _set(config.get("topics.regex")) else "source"


def _set(value: object) -> bool:
    return value is not None and str(value).strip() != ""
