"""The HTTP API: Connect's KIP-875 offsets routes plus health, readiness and status."""
