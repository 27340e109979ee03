"""What the clients refuse when built, before any request: values they cannot use are
``ClientConfigError`` at once, never a ``DaemonUnavailable`` at the first request (which tells callers
that asking again is safe) nor a request sent with a part of what was asked dropped."""

from __future__ import annotations

import asyncio
import math

import pytest

from emulator.client import ClientConfigError, ClientError
from emulator.client.errors import DaemonUnavailable
from emulator.client.history import HistoryClient
from emulator.client.http import AsyncOffsetsClient, Auth, OffsetsClient

URL = "http://127.0.0.1:9"


def _build_both(**options: object) -> None:
    """Build the synchronous, the history and the asyncio client alike: all three must refuse."""
    for cls in (OffsetsClient, HistoryClient):
        with pytest.raises(ClientConfigError) as refused:
            cls(**options)  # type: ignore[arg-type]
        assert not isinstance(refused.value, DaemonUnavailable)

    async def build() -> None:
        await AsyncOffsetsClient(**options).close()  # type: ignore[arg-type]

    with pytest.raises(ClientConfigError) as async_refused:
        asyncio.run(build())
    assert str(async_refused.value) == str(refused.value), "same error from both clients"


@pytest.mark.parametrize("timeout_s", [0, -1, 0.0, math.nan, math.inf])
def test_a_timeout_that_is_not_a_finite_number_above_zero_is_refused_when_built(timeout_s: float) -> None:
    """0 or a negative timeout failed every request as "cannot reach the daemon" (``DaemonUnavailable``,
    safe to retry), which no retry would fix; NaN and inf are no timeout at all."""
    _build_both(url=URL, timeout_s=timeout_s)
    with pytest.raises(ClientConfigError, match=r"^timeout_s must be a finite number of seconds above 0, got "):
        OffsetsClient(URL, timeout_s=timeout_s)


@pytest.mark.parametrize("url", ["127.0.0.1:8081", "localhost", "ftp://127.0.0.1:8081", "http//127.0.0.1:8081"])
def test_a_url_without_http_or_https_is_refused_when_built(url: str) -> None:
    """Found at the first request, it was "cannot reach the connect-offsets daemon": it never will."""
    _build_both(url=url)
    with pytest.raises(ClientConfigError, match=r"must start with http:// or https://"):
        OffsetsClient(url)


def test_a_refused_url_keeps_its_password_out_of_the_message() -> None:
    with pytest.raises(ClientConfigError) as refused:
        OffsetsClient("ftp://bob:s3cret@127.0.0.1:8081")
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("retry_for_s", [math.nan, -5, -0.1])
def test_a_retry_window_that_is_negative_or_nan_is_refused_when_built(retry_for_s: float) -> None:
    """NaN made a window that never ended (no time is past NaN); a negative one means nothing."""
    _build_both(url=URL, retry_for_s=retry_for_s)


@pytest.mark.parametrize("retry_for_s", [0, 0.5, 30, math.inf])
def test_zero_a_duration_and_no_limit_are_windows(retry_for_s: float) -> None:
    """0 asks once, ``math.inf`` asks without limit (as ``forever`` does for the variable)."""
    with OffsetsClient(URL, retry_for_s=retry_for_s, timeout_s=2) as client:
        assert client._retry_for_s == retry_for_s


def test_configuration_errors_are_client_errors_and_value_errors() -> None:
    """Callers catching either keep working: the root of the client's errors, and Python's own error
    for a bad argument."""
    assert issubclass(ClientConfigError, ClientError) and issubclass(ClientConfigError, ValueError)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (lambda: Auth(sequence_source="query-run-1"), "Auth: sequence_source without sequence"),
        (lambda: Auth(sequence=7), "Auth: sequence without sequence_source"),
        (lambda: Auth(claim_epoch=3, sequence=7), "Auth: sequence without sequence_source"),
    ],
)
def test_a_commit_sequence_without_its_source_or_number_is_refused(auth: object, message: str) -> None:
    """``Auth.params()`` dropped half a sequence, and the write went out unsequenced: not applied at
    most once, as its writer meant (the daemon answers 400 to either alone)."""
    with pytest.raises(ClientConfigError, match=rf"^{message}: a commit sequence needs both"):
        auth()  # type: ignore[operator]


def test_a_whole_sequence_and_none_are_sent_as_given() -> None:
    assert Auth(claim_epoch=2, sequence_source="run-1", sequence=0).params() == {
        "claim_epoch": "2",
        "sequence_source": "run-1",
        "sequence": "0",
    }
    assert Auth(claim_epoch=2).params() == {"claim_epoch": "2"}
    assert Auth().params() == {}
