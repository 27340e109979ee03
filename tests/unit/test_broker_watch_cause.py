"""A failed probe of the cluster says why, when a client was told why.

librdkafka answers a metadata request to a broker it cannot reach with "Broker transport failure",
and nothing more. The reason ("Connection refused", a TLS failure) reaches the clients' error
callbacks. The probe's failure is remembered after those, so it is what ``/status``
``reader.last_error`` showed, without the reason (a CI run met exactly that).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient

from emulator.logs.kafka.watch import BrokerWatch
from emulator.logs.last_error import LastError
from tests.fixtures.processes import free_port


def _admin(bootstrap: str, errors: LastError) -> AdminClient:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 0}
    config["error_cb"] = lambda err: errors.client_error("admin", err)
    return AdminClient(config)


def test_a_probe_of_a_gone_broker_quotes_the_clients_last_connection_error() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    errors = LastError("the test's log")
    admin = _admin(bootstrap, errors)
    watch = BrokerWatch(admin, bootstrap, "watched", errors=errors, probe_timeout_s=0.5)
    watch.probe()
    admin.poll(0.5)  # serves the error callback, as the daemon's clients' poll loops do
    watch.probe()
    message = errors.message
    assert message is not None
    assert message.startswith(f"the Kafka cluster at {bootstrap} did not answer a metadata request"), message
    assert "the clients' last error: Kafka admin error:" in message, message
    assert "Connection refused" in message, message
    assert watch.unreachable() is not None


def test_all_brokers_down_is_not_quoted_as_the_cause() -> None:
    """librdkafka follows the connection errors with "1/1 brokers are down", which names no cause."""
    bootstrap = f"127.0.0.1:{free_port()}"
    errors = LastError("the test's log")
    admin = _admin(bootstrap, errors)
    watch = BrokerWatch(admin, bootstrap, "watched", errors=errors, probe_timeout_s=0.5)
    for _ in range(3):
        watch.probe()
        admin.poll(0.3)
    watch.probe()
    message = errors.message or ""
    assert "brokers are down" not in message, message
    assert "Connection refused" in message, message
