"""The wire codec: bytes ⇄ (connector, partition map, offset map), exactly as Connect's JsonConverter."""

from emulator.codec.jackson_writer import dumps, java_double_str
from emulator.codec.keys import KeyProblem, ParsedKey, encode_key, logical_id, parse_key, problem_message, read_back_id
from emulator.codec.murmur2 import murmur2, partition_for
from emulator.codec.values import (
    CodecError,
    InvalidOffsets,
    encode_offset,
    loads_lenient,
    parse_offset,
    validate_format,
)

__all__ = [
    "CodecError",
    "InvalidOffsets",
    "KeyProblem",
    "ParsedKey",
    "dumps",
    "encode_key",
    "encode_offset",
    "java_double_str",
    "loads_lenient",
    "logical_id",
    "murmur2",
    "parse_key",
    "parse_offset",
    "partition_for",
    "problem_message",
    "read_back_id",
    "validate_format",
]
