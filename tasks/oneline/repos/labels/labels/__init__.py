"""labels: one small module per name."""
