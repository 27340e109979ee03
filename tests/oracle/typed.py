"""Java-typed values as plain JSON, so a test decides exactly which Java object the oracle builds.

Connect's bytes depend on the *Java* type and the *Java* map implementation (``Integer`` vs ``Long``,
``Double`` vs ``Float``, ``LinkedHashMap`` vs ``HashMap`` iteration order), none of which a Python value
can express. This module is the transport encoding between the test process and the JVM subprocess:

======================================  =========================================================
typed JSON                              Java object
======================================  =========================================================
``null``                                ``null``
``true`` / ``false``                    ``Boolean``
``"text"``                              ``String``
``{"int": n}``                          ``Integer`` (also ``{"short": n}``, ``{"byte": n}``)
``{"long": "<decimal>"}``               ``Long`` (a string, so JSON never rounds it)
``{"double": "<hex or special>"}``      ``Double``: ``float.hex()`` text, or ``NaN`` / ``Infinity``
                                        / ``-Infinity``; exact bits (also ``{"float": ...}``)
``{"bytes": "<base64>"}``               ``byte[]`` (``{"bytebuffer": ...}`` gives a ``ByteBuffer``)
``{"list": [...]}``                     ``ArrayList``
``{"map": [[k, v], ...], "impl": i}``   ``i`` = ``linked`` (default) ``LinkedHashMap``; ``hash``
                                        ``HashMap`` with puts in listed order; ``tree`` ``TreeMap``;
                                        ``hash_copy`` ``new HashMap<>(linkedHashMap)`` (the presized
                                        copy whose order changed in JDK 19); ``map_of``
                                        ``Map.ofEntries`` (order randomized per JVM start)
======================================  =========================================================

Values coming back from Java use the same encoding; maps then carry the ``impl`` they really have
(``hash``, ``linked``, ``tree``, ``immutable`` or the Java class name) and the entries in Java's
iteration order. Java types without a tag here come back as ``{"java": "<class>", "str": "<toString>"}``
(``{"decimal": ...}`` / ``{"bigint": ...}`` for ``BigDecimal`` / ``BigInteger``).

A plain Python ``dict`` is *not* a typed map (it would be ambiguous with the tags); use ``jmap`` or
``from_python``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any

Typed = Any  # None | bool | str | dict[str, Any]: the JSON shape documented above

MAP_IMPLS = ("linked", "hash", "tree", "hash_copy", "map_of")
_INT_RANGES = {"int": 32, "short": 16, "byte": 8}
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def integer(n: int) -> Typed:
    """A ``java.lang.Integer``."""
    return _checked_int("int", n)


def long(n: int) -> Typed:
    """A ``java.lang.Long``."""
    if not -(2**63) <= n < 2**63:
        raise ValueError(f"{n} does not fit a Java long")
    return {"long": str(n)}


def short(n: int) -> Typed:
    """A ``java.lang.Short``."""
    return _checked_int("short", n)


def byte(n: int) -> Typed:
    """A ``java.lang.Byte``."""
    return _checked_int("byte", n)


def double(x: float) -> Typed:
    """A ``java.lang.Double`` with exactly the bits of ``x`` (``-0.0`` and NaN included)."""
    return {"double": _float_text(x)}


def float32(x: float) -> Typed:
    """A ``java.lang.Float``; ``x`` is rounded to binary32 by the JVM (exact if already a float32)."""
    return {"float": _float_text(x)}


def binary(b: bytes) -> Typed:
    """A ``byte[]``."""
    return {"bytes": base64.b64encode(b).decode("ascii")}


def jlist(items: Iterable[Typed]) -> Typed:
    """An ``ArrayList`` of already-typed items."""
    return {"list": list(items)}


def jmap(entries: Mapping[Any, Typed] | Iterable[tuple[Typed, Typed]], impl: str = "linked") -> Typed:
    """A Java map built by putting ``entries`` in the given order into ``impl`` (see ``MAP_IMPLS``).

    Keys and values must already be typed; a ``str`` key is a ``String`` as usual.
    """
    if impl not in MAP_IMPLS:
        raise ValueError(f"unknown map impl {impl!r}; expected one of {MAP_IMPLS}")
    pairs = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
    return {"map": [[k, v] for k, v in pairs], "impl": impl}


def from_python(value: Any, map_impl: str = "linked") -> Typed:
    """Type a Python value the way Connect's JSON decoding would: int -> Long, float -> Double.

    bool -> Boolean, str -> String, bytes -> byte[], None -> null, list/tuple -> ArrayList,
    dict -> ``map_impl`` (insertion order kept, nested dicts too).
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return long(value)
    if isinstance(value, float):
        return double(value)
    if isinstance(value, bytes | bytearray):
        return binary(bytes(value))
    if isinstance(value, list | tuple):
        return jlist(from_python(v, map_impl) for v in value)
    if isinstance(value, dict):
        return jmap(((from_python(k, map_impl), from_python(v, map_impl)) for k, v in value.items()), map_impl)
    raise TypeError(f"no Java type for Python {type(value).__name__}: {value!r}")


def to_python(t: Typed) -> Any:
    """The Python value of a typed value: integers -> int, Double/Float -> float, maps -> dict.

    Dicts keep Java's iteration order. Unknown Java types stay as their tagged dict.
    """
    if t is None or isinstance(t, bool | str):
        return t
    if isinstance(t, list):
        raise ValueError(f"a bare JSON list is not a typed value: {t!r} (use {{'list': [...]}})")
    if not isinstance(t, dict):
        raise ValueError(f"not a typed value: {t!r}")
    if "map" in t:
        return {_hashable(to_python(k)): to_python(v) for k, v in t["map"]}
    if "list" in t:
        return [to_python(v) for v in t["list"]]
    for tag in ("int", "long", "short", "byte", "bigint"):
        if tag in t:
            return int(t[tag])
    for tag in ("double", "float"):
        if tag in t:
            return parse_float_text(t[tag])
    for tag in ("bytes", "bytebuffer"):
        if tag in t:
            return base64.b64decode(t[tag])
    return t


def parse_float_text(s: str | float | int) -> float:
    """Read the ``double``/``float`` payload: hex (``float.hex()``), decimal, or a JSON number."""
    if isinstance(s, int | float) and not isinstance(s, bool):
        return float(s)
    if not isinstance(s, str):
        raise ValueError(f"bad floating-point payload {s!r}")
    if s in _SPECIAL_DOUBLES:
        return _SPECIAL_DOUBLES[s]
    if "0x" in s.lower():
        return float.fromhex(s)
    return float(s)  # decimal text; float.fromhex would misread "10" as sixteen


def _float_text(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return float(x).hex()


def _checked_int(tag: str, n: int) -> Typed:
    bits = _INT_RANGES[tag]
    if not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
        raise ValueError(f"{n} does not fit a Java {tag}")
    return {tag: n}


def _hashable(k: Any) -> Any:
    # Java maps can have list/map keys; Python dicts cannot, so fall back to a tuple/frozen form.
    if isinstance(k, list):
        return tuple(_hashable(v) for v in k)
    if isinstance(k, dict):
        return tuple((_hashable(a), _hashable(b)) for a, b in k.items())
    return k
