"""The wire codec: bytes ⇄ (connector, partition map, offset map), exactly as Connect's JsonConverter."""
