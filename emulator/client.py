"""A synchronous client for the daemon's routes, with typed errors.

The CLI is built on it so that anything an operator can do from the shell, a script can do with
the same semantics and the same error texts.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8081"


class ClientError(Exception):
    """Base of the client's errors."""


class DaemonUnavailable(ClientError):
    """Nothing answered at the URL (daemon down, wrong URL, network)."""


class ApiError(ClientError):
    """The daemon answered with Connect's error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class OffsetsClient:
    def __init__(self, url: str = DEFAULT_URL, timeout_s: float = 90.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s)

    def __enter__(self) -> OffsetsClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise DaemonUnavailable(f"cannot reach the connect-offsets daemon at {self.url}: {exc}") from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            message = body.get("message") if isinstance(body, dict) else None
            raise ApiError(response.status_code, str(message or response.text or response.reason_phrase))
        return body

    def connectors(self) -> list[str]:
        result: list[str] = self._call("GET", "/connectors")
        return result

    def offsets(self, connector: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", f"/connectors/{_quote(connector)}/offsets")["offsets"]
        return result

    def alter(
        self, connector: str, body: dict[str, Any], dry_run: bool = False, create: bool = False
    ) -> dict[str, Any]:
        """``body`` is Connect's PATCH body ``{"offsets":[{"partition":…,"offset":…}]}``."""
        params = _dry(dry_run) | ({"create": "true"} if create else {})
        result: dict[str, Any] = self._call(
            "PATCH", f"/connectors/{_quote(connector)}/offsets", json=body, params=params
        )
        return result

    def reset(self, connector: str, dry_run: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/connectors/{_quote(connector)}/offsets", params=_dry(dry_run))
        return result

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/status")
        return result


def _quote(name: str) -> str:
    return quote(name, safe="")


def _dry(dry_run: bool) -> dict[str, str]:
    return {"dry_run": "true"} if dry_run else {}
