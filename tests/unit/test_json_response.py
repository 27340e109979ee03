"""GET bodies are rendered straight to bytes, identical to what FastAPI's default path sends.

``json_response`` skips ``jsonable_encoder`` (a Python walk of every value, ~10x the ``json.dumps``
for a 10,000-partition connector); these pin that the bytes, header and failures stay the same as
``JSONResponse(jsonable_encoder(content))`` for every kind of value a parsed offset can hold.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from emulator.server.routes.offsets import json_response

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
]


@pytest.mark.parametrize("content", BODIES)
def test_bytes_and_media_type_match_fastapis_own_json_response(content: Any) -> None:
    ours = json_response(content)
    theirs = JSONResponse(jsonable_encoder(content))
    assert ours.body == theirs.body
    assert ours.headers["content-type"] == theirs.headers["content-type"]
    assert ours.status_code == theirs.status_code == 200


def test_a_non_finite_float_fails_as_fastapis_json_response_fails() -> None:
    content = {"offsets": [{"partition": {"p": 1}, "offset": {"x": float("inf")}}]}
    with pytest.raises(ValueError):
        JSONResponse(jsonable_encoder(content))
    with pytest.raises(ValueError):
        json_response(content)
