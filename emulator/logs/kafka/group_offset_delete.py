"""Deleting single partitions' committed offsets of a consumer group (Kafka's OffsetDelete, KIP-496).

Connect answers ``"offset": null`` in a sink connector's PATCH with ``Admin.deleteConsumerGroupOffsets``.
confluent-kafka's Python ``AdminClient`` has no such call, but the librdkafka it ships does
(``rd_kafka_DeleteConsumerGroupOffsets``), so we call it through ``ctypes``.

In a child process, on purpose: librdkafka 2.16 corrupts its reference counts when the broker does
not support OffsetDelete (brokers before 2.4, and Tansu 0.6 here) and then aborts the whole process
with ``rd_kafka_q_destroy0: assert`` or a double free on a later call or on ``rd_kafka_destroy``
(librdkafka issue 3663, reproduced here). A crash of the child is an error answer; the daemon lives
on. The child prints its answer and leaves with ``os._exit`` without destroying anything.

Protocol: JSON on stdin ``{"config": {...}, "group": g, "partitions": [[topic, partition], ...],
"timeout_ms": n}``; JSON on stdout ``{"error": null | {"name","message"}, "partitions": [[topic,
partition, error-name-or-null], ...]}``.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_ERRSTR_SIZE = 512
_RD_KAFKA_PRODUCER = 0


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    """``error`` is the request's error name (e.g. ``_UNSUPPORTED_FEATURE``) or None; per partition too."""

    error: str | None
    message: str | None
    partitions: dict[tuple[str, int], str | None]


class OffsetDeleteFailed(Exception):
    """The child did not answer (crash, timeout, unusable output)."""


def delete_group_offsets(
    config: Mapping[str, str],
    group: str,
    partitions: Sequence[tuple[str, int]],
    timeout_s: float,
) -> OffsetDeleteResult:
    """Run the deletion in a child process; raises ``OffsetDeleteFailed`` if it gives no answer.

    ``config`` is a complete librdkafka configuration of strings (``KafkaClientConfig.plain``).
    """
    request = {
        "config": dict(config),
        "group": group,
        "partitions": [[t, p] for t, p in partitions],
        "timeout_ms": int(timeout_s * 1000),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "emulator.logs.kafka.group_offset_delete"],
            input=json.dumps(request).encode("utf-8"),  # stdin, so SASL secrets never show in ps
            capture_output=True,
            timeout=timeout_s + 15.0,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise OffsetDeleteFailed(f"no answer within {timeout_s + 15.0:g}s") from exc
    try:
        answer: dict[str, Any] = json.loads(done.stdout.decode("utf-8").strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        tail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-3:]
        raise OffsetDeleteFailed(f"the helper process exited with {done.returncode}: {' | '.join(tail)}") from exc
    error = answer.get("error")
    return OffsetDeleteResult(
        error=None if error is None else str(error["name"]),
        message=None if error is None else str(error["message"]),
        partitions={(str(t), int(p)): (None if e is None else str(e)) for t, p, e in answer.get("partitions", [])},
    )


# ---------------------------------------------------------------------------------- the child side


class _TopicPartition(ctypes.Structure):
    _fields_ = [
        ("topic", ctypes.c_char_p),
        ("partition", ctypes.c_int32),
        ("offset", ctypes.c_int64),
        ("metadata", ctypes.c_void_p),
        ("metadata_size", ctypes.c_size_t),
        ("opaque", ctypes.c_void_p),
        ("err", ctypes.c_int),
        ("_private", ctypes.c_void_p),
    ]


class _TopicPartitionList(ctypes.Structure):
    _fields_ = [
        ("cnt", ctypes.c_int),
        ("size", ctypes.c_int),
        ("elems", ctypes.POINTER(_TopicPartition)),
    ]


def _librdkafka() -> ctypes.CDLL:
    """The very librdkafka confluent-kafka loaded (from the process's memory map), else its wheel's copy."""
    import confluent_kafka

    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.split()[-1] if line.strip() else ""
            if "librdkafka" in os.path.basename(path):
                return ctypes.CDLL(path)
    here = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = glob.glob(os.path.join(here, "confluent_kafka.libs", "librdkafka*.so*"))
    return ctypes.CDLL(found[0] if found else "librdkafka.so.1")


def _bind(lib: ctypes.CDLL) -> Any:
    vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    tpl_p = ctypes.POINTER(_TopicPartitionList)
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, sz]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, sz]),
        "rd_kafka_queue_new": (vp, [vp]),
        "rd_kafka_queue_poll": (vp, [vp, ctypes.c_int]),
        "rd_kafka_AdminOptions_new": (vp, [vp, ctypes.c_int]),
        "rd_kafka_AdminOptions_set_request_timeout": (ctypes.c_int, [vp, ctypes.c_int, cp, sz]),
        "rd_kafka_topic_partition_list_new": (tpl_p, [ctypes.c_int]),
        "rd_kafka_topic_partition_list_add": (ctypes.POINTER(_TopicPartition), [tpl_p, cp, ctypes.c_int32]),
        "rd_kafka_DeleteConsumerGroupOffsets_new": (vp, [cp, tpl_p]),
        "rd_kafka_DeleteConsumerGroupOffsets": (None, [vp, ctypes.POINTER(vp), sz, vp, vp]),
        "rd_kafka_event_error": (ctypes.c_int, [vp]),
        "rd_kafka_event_error_string": (cp, [vp]),
        "rd_kafka_event_DeleteConsumerGroupOffsets_result": (vp, [vp]),
        "rd_kafka_DeleteConsumerGroupOffsets_result_groups": (ctypes.POINTER(vp), [vp, ctypes.POINTER(sz)]),
        "rd_kafka_group_result_error": (vp, [vp]),
        "rd_kafka_group_result_partitions": (tpl_p, [vp]),
        "rd_kafka_error_name": (cp, [vp]),
        "rd_kafka_error_string": (cp, [vp]),
        "rd_kafka_err2name": (cp, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _text(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8", errors="replace")


def _run_child(request: dict[str, Any]) -> dict[str, Any]:
    rk_lib = _bind(_librdkafka())
    errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
    conf = rk_lib.rd_kafka_conf_new()
    for key, value in request["config"].items():
        if rk_lib.rd_kafka_conf_set(conf, str(key).encode(), str(value).encode(), errstr, _ERRSTR_SIZE) != 0:
            return {"error": {"name": "_INVALID_ARG", "message": f"{key}: {_text(errstr.value)}"}}
    handle = rk_lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
    if not handle:
        return {"error": {"name": "_INVALID_ARG", "message": _text(errstr.value)}}
    queue = rk_lib.rd_kafka_queue_new(handle)
    options = rk_lib.rd_kafka_AdminOptions_new(handle, 0)  # RD_KAFKA_ADMIN_OP_ANY
    rk_lib.rd_kafka_AdminOptions_set_request_timeout(options, request["timeout_ms"], errstr, _ERRSTR_SIZE)
    partitions = rk_lib.rd_kafka_topic_partition_list_new(max(len(request["partitions"]), 1))
    for topic, partition in request["partitions"]:
        rk_lib.rd_kafka_topic_partition_list_add(partitions, str(topic).encode(), int(partition))
    deletion = rk_lib.rd_kafka_DeleteConsumerGroupOffsets_new(str(request["group"]).encode(), partitions)
    rk_lib.rd_kafka_DeleteConsumerGroupOffsets(handle, (ctypes.c_void_p * 1)(deletion), 1, options, queue)
    event = rk_lib.rd_kafka_queue_poll(queue, request["timeout_ms"] + 5000)
    if not event:
        return {"error": {"name": "_TIMED_OUT", "message": "no answer from the group coordinator"}}
    code = rk_lib.rd_kafka_event_error(event)
    if code:
        name = _text(rk_lib.rd_kafka_err2name(code))
        return {"error": {"name": name, "message": _text(rk_lib.rd_kafka_event_error_string(event))}}
    result = rk_lib.rd_kafka_event_DeleteConsumerGroupOffsets_result(event)
    count = ctypes.c_size_t()
    groups = rk_lib.rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, ctypes.byref(count))
    answer: dict[str, Any] = {"error": None, "partitions": []}
    for i in range(count.value):
        group_error = rk_lib.rd_kafka_group_result_error(groups[i])
        if group_error:
            answer["error"] = {
                "name": _text(rk_lib.rd_kafka_error_name(group_error)),
                "message": _text(rk_lib.rd_kafka_error_string(group_error)),
            }
        listed = rk_lib.rd_kafka_group_result_partitions(groups[i])
        for j in range(listed.contents.cnt if listed else 0):
            element = listed.contents.elems[j]
            error = _text(rk_lib.rd_kafka_err2name(element.err)) if element.err else None
            answer["partitions"].append([_text(element.topic), int(element.partition), error])
    return answer


def main() -> None:
    """Child entry point; never tears librdkafka down (see the module docstring)."""
    try:
        answer = _run_child(json.loads(sys.stdin.read()))
    except Exception as exc:  # the parent needs an answer, not a traceback
        answer = {"error": {"name": "_FAIL", "message": f"{type(exc).__name__}: {exc}"}}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
