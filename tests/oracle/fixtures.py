"""Java oracle fixtures (being written)."""
