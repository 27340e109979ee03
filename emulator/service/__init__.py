"""The offsets operations behind the API: Connect's KIP-875 rules, write guard, request bodies, sinks."""
