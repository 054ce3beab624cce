"""switches: one small module per name."""
