"""JSON answers without FastAPI's encoding on the event loop; large ones on a worker thread, in slices.

A route that returns a dict has FastAPI walk it with ``jsonable_encoder`` and then ``json.dumps`` it,
both on the event loop. Our bodies are plain JSON values already (parsed offsets are dict/list/str/
int/float/bool/None), for which that walk changes nothing: for a 10,000-partition connector it cost
~10× the ``json.dumps`` itself (benchmarks/RESULTS.md). ``json_response`` sends the same bytes
without it. For the answers that grow with the data — a byte-exact export of every record, an
import's diff, a connector's offsets as of a past time — even the ``json.dumps`` held every other
request for seconds: an export of 200,000 records (52 MB) stalled a ``/healthz`` probe 4.6–5.2 s
(round 17). Those answer with ``json_answer``, encoded on a worker thread.

A worker thread alone is not enough: the C encoder holds the interpreter lock for a whole call, so
one ``json.dumps`` of 52 MB would still stop the event loop as long. ``encode`` therefore encodes
lists longer than ``SLICE_ITEMS`` a slice per call; between two calls the loop gets its turn.
Every function here sends exactly the bytes Starlette's ``JSONResponse`` would for the same body,
except two that Starlette cannot send at all, which are written as Connect's REST layer (Jackson)
writes them: a lone surrogate is escaped (``emulator.codec.surrogates``), and a double beyond the
finite range — Connect reads ``1e999`` in a record as an infinite double — is the string
``"Infinity"`` or ``"-Infinity"`` (``QUOTE_NON_NUMERIC_NUMBERS``, on by default), not a 500.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from collections.abc import Mapping
from typing import Any

from fastapi import Response

from emulator.codec.jackson_writer import at_any_depth, java_double_str
from emulator.codec.surrogates import json_utf8

SLICE_ITEMS = 1000
"""Items of a long list per encoder call: a few milliseconds of holding the interpreter lock."""

_strict_dumps = functools.partial(json.dumps, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def _dumps(content: Any) -> str:
    """Starlette's arguments; only a body the encoder refuses for a non-finite float is walked again,
    and one nested beyond its recursion is written by Jackson's rules (``at_any_depth``)."""
    return at_any_depth(_starlette_dumps, content)


def _starlette_dumps(content: Any) -> str:
    try:
        return _strict_dumps(content)
    except ValueError as refused:
        if "Out of range float" not in str(refused):
            raise
        return _strict_dumps(_quoted_non_finite(content))


def _quoted_non_finite(value: Any) -> Any:
    """``value`` with every infinite or NaN float as the string Jackson writes for it."""
    if isinstance(value, float) and not math.isfinite(value):
        return java_double_str(value)
    if isinstance(value, dict):
        return {key: _quoted_non_finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_quoted_non_finite(item) for item in value]
    return value


def render_json(content: Any) -> bytes:
    """Starlette's ``JSONResponse.render``: the same ``json.dumps`` arguments, so the same bytes."""
    return json_utf8(_dumps(content))


def json_bytes(body: bytes, headers: Mapping[str, str] | None = None) -> Response:
    """A 200 answer of ``body``, JSON already encoded."""
    return Response(body, media_type="application/json", headers=dict(headers) if headers else None)


def json_response(content: Any, headers: Mapping[str, str] | None = None) -> Response:
    """The bytes FastAPI's own ``JSONResponse`` would send, without ``jsonable_encoder`` first (a body
    that stays small: it is encoded here, on the event loop)."""
    return json_bytes(render_json(content), headers)


def encode(content: Any, slice_items: int = SLICE_ITEMS) -> bytes:
    """``render_json(content)``, long lists (at any depth under objects) encoded a slice per call, each
    slice to bytes at once: one copy of the whole body at the end, not one per nesting level."""
    pieces: list[bytes] = []
    try:
        _encode_into(pieces, content, slice_items)
    except RecursionError:  # objects nested beyond Python's recursion limit: no slices, one call
        return json_utf8(_dumps(content))
    return b"".join(pieces)


def _encode_into(pieces: list[bytes], content: Any, slice_items: int) -> None:
    if isinstance(content, dict) and all(isinstance(key, str) for key in content):
        pieces.append(b"{")
        for i, (key, value) in enumerate(content.items()):
            pieces.append(b"%s%s:" % (b"," if i else b"", json_utf8(_dumps(key))))
            _encode_into(pieces, value, slice_items)
        pieces.append(b"}")
    elif isinstance(content, list) and len(content) > slice_items:
        pieces.append(b"[")
        for start in range(0, len(content), slice_items):
            if start:
                pieces.append(b",")
            pieces.append(json_utf8(_dumps(content[start : start + slice_items])[1:-1]))
        pieces.append(b"]")
    else:
        pieces.append(json_utf8(_dumps(content)))


async def json_answer(content: Any, headers: Mapping[str, str] | None = None) -> Response:
    """``json_response`` for a body that may be large: encoded on a worker thread, in slices."""
    return json_bytes(await asyncio.to_thread(encode, content), headers)
