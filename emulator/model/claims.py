"""One owner per connector: claims, epochs and fencing.

A writer (a Spark query, the CLI, a Python client) claims a connector before committing. Each
claim gets the next epoch for that connector, durably, in the log's own storage; a newer claim
fences every older one. A fenced writer's commits are refused (``Fenced``) and never reach the log:
the check is atomic with the write (one SQLite transaction in the embedded log; a transactional
producer per connector in Kafka, whose ``init_transactions`` makes the broker reject the older
producer's writes — KIP-618's zombie fencing, applied to offset writers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict
from urllib.parse import quote

from emulator.model.errors import ClaimHeld, Conflict


class ClaimBody(TypedDict):
    """A claim as the API answers it (``POST``/``GET /connectors/{c}/claim``)."""

    connector: str
    owner: str
    epoch: int
    claimed_at_ms: int


@dataclass(frozen=True, slots=True)
class Claim:
    connector: str
    owner: str
    epoch: int
    claimed_at_ms: int

    def as_dict(self) -> ClaimBody:
        return {
            "connector": self.connector,
            "owner": self.owner,
            "epoch": self.epoch,
            "claimed_at_ms": self.claimed_at_ms,
        }


@dataclass(frozen=True, slots=True)
class Fence:
    """What a commit presents: it may write only while ``epoch`` is the connector's current one.

    ``epoch=None`` is a writer that presents no claim (Connect's own API, an operator): it may write
    only while nobody holds the connector. The log checks either rule atomically with the write.
    """

    connector: str
    epoch: int | None


class Fenced(Conflict):
    """The writer's claim is no longer current: a newer claim fenced it; nothing was written."""

    kind = "fenced"


def fenced_message(connector: str, epoch: int, current: Claim | None) -> str:
    if current is None:
        return f"Connector {connector} has no current claim; the writer with epoch {epoch} was fenced or released"
    if epoch > current.epoch:  # epochs only grow: nobody was ever given this one
        return (
            f"Connector {connector} is claimed by {current.owner!r} with epoch {current.epoch}; epoch {epoch} was "
            "never issued (a claim's epoch comes from POST /connectors/{c}/claim), and nothing was written"
        )
    return (
        f"Connector {connector} is claimed by {current.owner!r} with epoch {current.epoch}; "
        f"the writer with epoch {epoch} has been fenced and nothing was written"
    )


def held_message(connector: str, claim: Claim, takes_epoch: bool = True) -> str:
    """Not Connect's not-STOPPED text: that one sends the user to ``PUT /connectors/{c}/stop``, which
    this daemon does not serve, while what blocks this write is a claim, lifted by its holder. A
    request that takes no claim epoch (a rollback) is told only the way that works for it."""
    release = f"(DELETE /connectors/{quote(connector, safe='')}/claim?epoch={claim.epoch})"  # a path to type
    held = f"The offsets of connector {connector} are claimed by {claim.owner!r} (epoch {claim.epoch}), so only that "
    if not takes_epoch:
        return (
            held
            + "claim's holder may modify them, and this request takes no claim epoch: release the claim "
            + f"first {release}"
        )
    return (
        held
        + f"claim's holder may modify them: write with claim_epoch={claim.epoch}, or release the claim first {release}"
    )


def refuse_unless_current(fence: Fence, current: Claim | None) -> None:
    """A writer outside the log's own fenced writes (a sink connector's consumer group) against the
    connector's current claim: ``ClaimHeld`` for one without an epoch while anyone holds it,
    ``Fenced`` for an epoch that is not the current claim's."""
    if fence.epoch is None:
        if current is not None:
            raise ClaimHeld(held_message(fence.connector, current))
    elif current is None or current.epoch != fence.epoch:
        raise Fenced(fenced_message(fence.connector, fence.epoch, current))
