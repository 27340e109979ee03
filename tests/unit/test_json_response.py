"""Bodies are rendered straight to bytes, identical to what FastAPI's default path sends.

``json_response`` skips ``jsonable_encoder`` (a Python walk of every value, ~10x the ``json.dumps``
for a 10,000-partition connector), and ``json_answer`` also encodes on a worker thread, long lists
a slice per encoder call (so the event loop runs between slices); these pin that the bytes, header
and failures stay the same as ``JSONResponse(jsonable_encoder(content))`` for every kind of value a
parsed offset can hold, however a body is sliced.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from emulator.server.json_answer import encode, json_answer, json_response

BODIES: list[Any] = [
    {"offsets": []},
    {
        "offsets": [
            {"partition": {"filename": "/data/ü-日本.txt"}, "offset": {"position": 9223372036854775807}},
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": -1}},
            {"partition": {"a": [1, 2.5, True, None, {"b": '"quoted"\\n'}]}, "offset": None},
            {"partition": {"big": 123456789012345678901234567890}, "offset": {"f": 1e300, "z": 0.0}},
        ]
    },
    ["conn-b", "conn-a", "ñ"],
    {
        "records": [{"key": f"k-{i}", "value": None if i % 3 else "ü"} for i in range(7)],
        "diff": {"entries": [[1], [2]]},
    },
    [[{"n": i}] * (i % 4) for i in range(9)],
]


@pytest.mark.parametrize("content", BODIES)
def test_bytes_and_media_type_match_fastapis_own_json_response(content: Any) -> None:
    ours = json_response(content)
    theirs = JSONResponse(jsonable_encoder(content))
    assert ours.body == theirs.body
    assert ours.headers["content-type"] == theirs.headers["content-type"]
    assert ours.status_code == theirs.status_code == 200


def test_a_non_finite_float_is_written_as_connects_rest_writes_it_where_fastapi_fails() -> None:
    """Connect reads ``1e999`` in a record as an infinite double and its REST layer (Jackson,
    ``QUOTE_NON_NUMERIC_NUMBERS``) writes that as a string; FastAPI's encoder refuses it (a 500)."""
    content = {"offsets": [{"partition": {"p": 1}, "offset": {"x": float("inf"), "y": -float("inf")}}]}
    with pytest.raises(ValueError):
        JSONResponse(jsonable_encoder(content))
    as_jackson = {"offsets": [{"partition": {"p": 1}, "offset": {"x": "Infinity", "y": "-Infinity"}}]}
    assert json_response(content).body == JSONResponse(as_jackson).body


@pytest.mark.parametrize("slice_items", [1, 2, 3, 1000])
@pytest.mark.parametrize("content", BODIES)
def test_a_body_encoded_in_slices_is_the_same_bytes(content: Any, slice_items: int) -> None:
    assert encode(content, slice_items) == JSONResponse(jsonable_encoder(content)).body


@pytest.mark.parametrize("content", BODIES)
def test_a_large_answer_sends_the_same_bytes_and_headers(content: Any) -> None:
    ours = asyncio.run(json_answer(content, {"X-Offsets-As-Of": "2026-11-26T00:00:00.000Z"}))
    assert ours.body == JSONResponse(jsonable_encoder(content)).body
    assert ours.headers["content-type"] == "application/json"
    assert ours.headers["x-offsets-as-of"] == "2026-11-26T00:00:00.000Z"


def test_a_non_finite_float_is_written_as_jackson_writes_it_when_sliced_too() -> None:
    def body(x: Any) -> dict[str, Any]:
        return {"offsets": [{"partition": {"p": i}, "offset": {"x": x if i == 5 else i}} for i in range(9)]}

    assert encode(body(float("nan")), slice_items=2) == JSONResponse(body("NaN")).body
    assert encode(body(float("-inf")), slice_items=2) == JSONResponse(body("-Infinity")).body
