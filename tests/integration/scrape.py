"""Reading a daemon's ``/metrics`` the way Prometheus does: with prometheus_client's own parser."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Samples:
    """Every sample of one scrape, by name and labels."""

    values: dict[Key, float]

    def get(self, name: str, **labels: str) -> float | None:
        """The sample with exactly these labels, None if absent."""
        return self.values.get((name, frozenset(labels.items())))

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels, 0 if absent (a counter never incremented)."""
        return self.get(name, **labels) or 0.0

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {labels: v for (n, labels), v in self.values.items() if n == name}

    def label_values(self, name: str, label: str) -> set[str]:
        return {dict(labels)[label] for labels in self.series(name) if label in dict(labels)}


def scrape(url: str, path: str = "/metrics") -> Samples:
    return parse(httpx.get(url + path, timeout=30))


def parse(response: httpx.Response) -> Samples:
    """A ``/metrics`` answer (from any client: an in-process app's too), read by Prometheus's parser."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain"), response.headers["content-type"]
    values: dict[Key, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Samples(values)


def scrape_until(url: str, done: Callable[[Samples], bool], what: str, timeout_s: float = 20.0) -> Samples:
    """Scrape until ``done`` holds; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    samples = scrape(url)
    while not done(samples):
        assert time.monotonic() < deadline, f"{what}: not seen in /metrics within {timeout_s} s"
        time.sleep(0.1)
        samples = scrape(url)
    return samples
