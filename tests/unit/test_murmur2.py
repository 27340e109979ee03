"""murmur2 reproduces Java's Utils.murmur2 on the published vectors (golden checks over many keys
against a live JVM live in tests/compat)."""

from emulator.codec.murmur2 import murmur2, partition_for


def test_matches_the_vectors_librdkafka_and_java_share() -> None:
    assert murmur2(b"kafka") == -798503068
    assert murmur2(b"amqp") == 767747138
    assert murmur2(b"giberish123456789") & 0x7FFFFFFF == 257239820


def test_partition_matches_java_for_connect_keys() -> None:
    assert partition_for(b'["local-file-source",{"filename":"/tmp/test.txt"}]', 25) == 21
    assert partition_for(b'["inventory-connector",{"server":"dbserver1"}]', 25) == 11
