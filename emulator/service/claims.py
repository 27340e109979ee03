"""Claims (ours): one writer per connector, over the API (see ``emulator.model.claims``).

The guard stores and checks claims; this service adds what the API promises around them: a claim
is answered only from a log read to its end, and only once the new owner can see every write of
the owner it fenced. Claiming and releasing are writes, so they answer within ``--write-timeout``
too (503 ``write_outcome_unknown`` after it: ``GET …/claim`` then says whether the claim was made;
a claim, whose log call is given the time left, is waited for ``OVERRUN_S`` longer, as a write's is,
so its own refusal at the deadline — ``log_timeout``, nothing was claimed — is the answer).

A claim is made in the connector's write section (``OffsetsWriter.section``), as a write is, so it is
ordered wholly before or wholly after every write of the connector through this daemon, an import
(which holds the sections of the connectors it names) included. An import checks that no connector it touches is
claimed and then writes unfenced: its check in the section is its fence, so a claim must not come
between the two. It used to (the claim took no section), and the import's records then landed after a
claim that had answered, without its epoch. The section is waited for within the claim's deadline
(503 ``log_timeout``, nothing claimed, after it), and kept, like a write's, until the log answered the
claim, even when the request was answered ``write_outcome_unknown`` first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from emulator.model.claims import Claim
from emulator.model.errors import ClaimNotFound, ClaimsUnsupported, OffsetsError
from emulator.service.checks import ConnectorChecks
from emulator.service.write_guard import WriteGuard
from emulator.service.writer import OVERRUN_S, Deadline, OffsetsWriter


class ClaimsService:
    def __init__(
        self,
        checks: ConnectorChecks,
        guard: WriteGuard,
        writer: OffsetsWriter,
        read_to_end: Callable[[], Awaitable[None]],
        write_timeout_s: float = 10.0,
        refusal: Callable[[str], str | None] | None = None,
    ) -> None:
        """``writer``: whose connector sections a claim takes, as the writes it orders against do.
        ``refusal(connector)``: why a connector cannot be claimed at all (KIP-618 connectors), or None."""
        self._checks = checks
        self._guard = guard
        self._writer = writer
        self._read_to_end = read_to_end
        self._write_timeout_s = write_timeout_s
        self._refusal = refusal

    async def claim(self, connector: str, owner: str, force: bool = False) -> Claim:
        """Claim, then read the log to its end before answering: the new owner's next read must see
        every write of the owner it fenced (none can follow: the fence is in the log), or it could
        resume from a stale offset and move it backwards.

        Made in the connector's write section (see the module's docstring): a write or an import that
        holds it is waited for, one sent meanwhile waits for the claim and then presents its epoch or
        is refused."""
        self._checks.ensure_ready()
        why = None if self._refusal is None else self._refusal(connector)
        if why is not None:
            raise ClaimsUnsupported(why)
        deadline = Deadline(self._write_timeout_s)
        async with self._writer.section(connector, deadline, "nothing was claimed") as section:
            section.subject = f"a claim of connector {connector}"
            # the config topic within the request's time: a stalled broker is a 503, as for every write
            await self._checks.refresh_within(
                deadline, "nothing was claimed; is the Kafka cluster answering? Try again"
            )
            # The log gets the time left once the section is had (a first claim on Kafka waits for the
            # connector's writes begun before it only so long, then refuses: ``log_timeout``), and is
            # waited for a little longer, as a write's log call is, so that refusal is the answer, not
            # "it may still happen". Answered late, the claim keeps the section until the log answered.
            claim = await section.outside(
                self._guard.claim(connector, owner, force, deadline.remaining()), f"Claiming {connector}", OVERRUN_S
            )
        await self._read_to_end()
        return claim

    async def current(self, connector: str, timeout_s: float | None = None) -> Claim:
        """Read from the claims topic's end, so within ``timeout_s`` (default ``--write-timeout``, like
        a write; 503 ``log_timeout`` after it): a stalled broker must not hold the request for the
        log's own 30 s."""
        current = await self._guard.current(connector, self._write_timeout_s if timeout_s is None else timeout_s)
        if current is None:
            raise ClaimNotFound(f"Connector {connector} has no current claim")
        return current

    async def current_many(self, connectors: Sequence[str], timeout_s: float | None = None) -> dict[str, Claim]:
        """The current claims of ``connectors`` (unclaimed ones absent), for listing many at once; read
        within ``timeout_s`` (default ``--write-timeout``)."""
        return await self._guard.current_many(connectors, self._write_timeout_s if timeout_s is None else timeout_s)

    async def current_all(self, timeout_s: float | None = None) -> list[Claim]:
        """Every current claim, sorted by connector, including claims on connectors without offsets;
        read within ``timeout_s`` (default ``--write-timeout``; 503 ``log_timeout`` after it), like
        ``current``. A log without claims support has none: an empty list."""
        claims = await self._guard.current_all(self._write_timeout_s if timeout_s is None else timeout_s)
        return [claims[name] for name in sorted(claims)]

    async def release(self, connector: str, epoch: int) -> None:
        deadline = Deadline(self._write_timeout_s)
        if not await deadline.within_unknown(self._guard.release(connector, epoch), f"Releasing {connector}'s claim"):
            raise ClaimNotFound(await self._not_released(connector, epoch, deadline))

    async def _not_released(self, connector: str, epoch: int, deadline: Deadline) -> str:
        """Why nothing was released, naming the claim that is current instead: whoever sent a stale
        epoch asks that next. Read in the time the request has left; without it, the plain answer
        (the 404 stands either way, only its message is richer)."""
        plain = f"Connector {connector} has no current claim with epoch {epoch}"
        try:
            current = await self._guard.current(connector, deadline.remaining())
        except OffsetsError:
            return plain
        if current is None:
            return f"Connector {connector} has no current claim, so none with epoch {epoch}"
        return f"{plain}: its current claim is epoch {current.epoch}, held by {current.owner!r}"
