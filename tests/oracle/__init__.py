"""Java oracle (being written)."""
