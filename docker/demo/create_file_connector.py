"""One-shot demo: create (or update) a FileStream source connector through Connect's REST API.

Run by the ``demo-connector`` service (``docker compose --profile demo up``). It uses only the
standard library so it runs in a bare ``python:3.11-slim`` container. ``PUT .../config`` is
Connect's create-or-update call, so running the demo twice is harmless.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

CONNECT_URL = os.environ.get("CONNECT_URL", "http://connect:8083").rstrip("/")
NAME = os.environ.get("DEMO_CONNECTOR", "file-demo")
FILE = os.environ.get("DEMO_FILE", "/data/connect-input/lines.txt")
TOPIC = os.environ.get("DEMO_TOPIC", "file-demo-lines")
WAIT_S = float(os.environ.get("DEMO_WAIT_S", "120"))


def request(method: str, path: str, body: object | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        CONNECT_URL + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_for_connect() -> None:
    deadline = time.monotonic() + WAIT_S
    last = ""
    while time.monotonic() < deadline:
        try:
            status, text = request("GET", "/connector-plugins")
            if status == 200 and "FileStreamSourceConnector" in text:
                return
            last = f"HTTP {status}: {text[:200]}"
        except OSError as exc:
            last = str(exc)
        time.sleep(2)
    sys.exit(f"demo: Connect at {CONNECT_URL} did not offer FileStreamSourceConnector within {WAIT_S:.0f}s ({last})")


def main() -> None:
    wait_for_connect()
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": FILE,
        "topic": TOPIC,
        "topic.creation.default.partitions": "1",
        "topic.creation.default.replication.factor": "1",
    }
    status, text = request("PUT", f"/connectors/{NAME}/config", config)
    if status not in (200, 201):
        sys.exit(f"demo: creating connector {NAME} failed with HTTP {status}: {text}")
    print(f"demo: connector {NAME} reads {FILE} into topic {TOPIC}.")
    print(f"demo: its offsets, through the daemon: GET http://127.0.0.1:8081/connectors/{NAME}/offsets")


if __name__ == "__main__":
    main()
