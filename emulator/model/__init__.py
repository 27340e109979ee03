"""The shared model every layer speaks: log records, domain errors, claims, commit sequences,
connector states and times. It imports nothing above the codec."""
