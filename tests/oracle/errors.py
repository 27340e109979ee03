"""What can go wrong when asking the JVM: Java said no, or the JVM itself failed.

The two are kept apart on purpose: a Java exception is an *answer* (tests assert on it, e.g. that
JsonConverter rejects some bytes), while a crash or a timeout means the oracle could not answer and
the test must fail loudly with the JVM's own log, never hang or pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JavaError:
    """A Java exception as data: the class, the message, and the cause chain."""

    java_class: str
    message: str | None
    cause: JavaError | None = None

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> JavaError:
        cause = d.get("cause")
        return cls(d["java_class"], d.get("message"), cls.from_wire(cause) if cause else None)

    def chain(self) -> list[JavaError]:
        out: list[JavaError] = []
        e: JavaError | None = self
        while e is not None:
            out.append(e)
            e = e.cause
        return out

    def __str__(self) -> str:
        return " <- caused by ".join(f"{e.java_class}: {e.message}" for e in self.chain())


class OracleError(Exception):
    """The oracle could not answer (JVM failed to start, crashed, hung or broke the protocol)."""


class OracleTimeout(OracleError):
    """A request ran past its deadline; the JVM was killed (the next request starts a fresh one)."""


class JavaException(OracleError):
    """Java threw while executing a request that has no error-as-value result."""

    def __init__(self, error: JavaError, context: str) -> None:
        super().__init__(f"{context}: {error}")
        self.error = error
