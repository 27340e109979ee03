"""A sink connector's reset comes wholly after a group write of the same connector still on its way.

A PATCH of a sink connector whose admin call outlives the request's deadline is answered 503 (outcome
unknown) while the call goes on. The reset (DELETE) sent next used to list the group's committed offsets
at once, without that write, and then either delete the group before it landed (no claims topic: nothing
orders the two, so the late commit outlived a reset answered 200) or wait for the claims' connector lock
the write held and delete it too (so the reset deleted and audited a partition other than those it
listed). Now a sink's group write answered late keeps the connector's write section until its admin call
returned (``WriteSection.outside``), and the reset lists and deletes in that section: wholly after it.

The app runs in-process over the session's Tansu (``daemon_on``), so the admin calls can be held and
watched: ``Gate`` holds the late PATCH's commit, and the wrapper of ``committed`` notes what the reset
listed, and when.
"""

from __future__ import annotations

import httpx
import pytest

from tests.fixtures.asgi import section_users
from tests.fixtures.broker import TansuBroker
from tests.fixtures.in_process import in_thread
from tests.fixtures.waits import until
from tests.integration.connect_helpers import unique
from tests.integration.test_sink_claims_atomic import Gate, committed, daemon_on, entry, open_claims_store

pytestmark = pytest.mark.kafka


@pytest.mark.slow
@pytest.mark.parametrize("claims_topic", [False, True], ids=["no-claims-topic", "claims-topic-exists"])
def test_a_reset_after_a_sink_write_answered_late_lists_and_deletes_after_that_write(
    kafka_broker: TansuBroker, claims_topic: bool
) -> None:
    topic = unique("orders")
    kafka_broker.create_topic(topic, 3)
    name = unique("sink")
    group = f"connect-{name}"
    with daemon_on(kafka_broker, write_timeout_s=2.0) as daemon:
        if claims_topic:
            open_claims_store(daemon)
        url = daemon.offsets_url(name)
        seeded = httpx.patch(url, params={"kind": "sink"}, json={"offsets": [entry(topic, 0, 4)]}, timeout=60)
        assert seeded.status_code == 200, seeded.text

        groups = daemon.sinks._groups
        listed: list[dict[tuple[str, int], int]] = []
        real_committed = groups.committed

        def listing(asked: str) -> dict[tuple[str, int], int]:
            found = real_committed(asked)
            listed.append(found)
            daemon.note("listed")
            return found

        groups.committed = listing  # type: ignore[method-assign]
        gate = Gate(daemon, "commit")
        groups.commit = gate  # type: ignore[method-assign]

        late = httpx.patch(url, params={"kind": "sink"}, json={"offsets": [entry(topic, 1, 6)]}, timeout=60)
        assert late.status_code == 503, late.text
        assert "may still happen" in late.json()["message"]

        resetting, reset = in_thread(lambda: httpx.delete(url, params={"kind": "sink"}, timeout=60), daemon, "reset")
        # Unfixed, the reset lists the group at once (and, with no claims topic, answers); fixed, it waits for
        # the connector's section, which the late write still holds.
        until(
            lambda: bool(listed or reset) or section_users(daemon.runtime, name) >= 2,
            "the reset listed the group, or waits for the connector's section",
        )
        daemon.note("gate opened")
        gate.open.set()
        resetting.join(60)

        assert reset and reset[0].status_code == 200, reset and reset[0].text
        assert daemon.events.index("commit returned") < daemon.events.index("listed"), daemon.events
        assert listed == [{(topic, 0): 4, (topic, 1): 6}], "the reset listed the group without the late write"
        assert committed(kafka_broker, group, topic) == {0: None, 1: None, 2: None}, "the late write outlived it"
