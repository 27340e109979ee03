"""A number beyond a double's range in a record another writer put in the log is served, not a 500.

Connect's ``JsonConverter`` reads ``1e999`` as a double infinity (``BigDecimal.doubleValue()``), and
its REST layer writes a double infinity as Jackson does with ``QUOTE_NON_NUMERIC_NUMBERS`` (on by
default): the string ``"Infinity"``. Such a record is legal in a shared topic (a script, another
tool); the daemon's JSON answers refused to encode the float and every GET and history request of
the connector answered 500, on every daemon reading the topic. The records are written raw through
``POST /offsets/records`` (byte for byte, as another writer's would be), on a daemon of this test's
own: a connector the session's daemon served this way would change what other tests read.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import unique


def raw(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.slow
def test_numbers_beyond_a_double_are_served_as_connects_rest_writes_them(daemon_factory: DaemonFactory) -> None:
    daemon = daemon_factory()
    name = unique("beyond-double")
    records = [
        (f'["{name}",{{"good":1}}]', '{"position":1}'),
        (f'["{name}",{{"big":1}}]', '{"x":1e999,"y":-1e999,"z":1.5}'),
        (f'["{name}",{{"k":1e999}}]', '{"position":2}'),
    ]
    imported = httpx.post(
        f"{daemon.url}/offsets/records",
        json={"records": [{"key": raw(k), "value": raw(v)} for k, v in records]},
        timeout=30,
    )
    assert imported.status_code == 200, imported.text

    answer = httpx.get(f"{daemon.url}/connectors/{name}/offsets", timeout=30)
    assert answer.status_code == 200, answer.text
    served = {str(o["partition"]): o["offset"] for o in answer.json()["offsets"]}
    assert served == {
        str({"good": 1}): {"position": 1},
        str({"big": 1}): {"x": "Infinity", "y": "-Infinity", "z": 1.5},
        # Listed as Connect lists it; Connect writes the partition back as {"k":"Infinity"}, other
        # bytes, so its GET and its tasks read no offset for this key (docs/api.md).
        str({"k": "Infinity"}): None,
    }

    history = httpx.get(f"{daemon.url}/connectors/{name}/offsets/history", timeout=30)
    assert history.status_code == 200, history.text
    offsets: list[Any] = [row["offset"] for row in history.json()["changes"]]
    assert {"x": "Infinity", "y": "-Infinity", "z": 1.5} in offsets
