"""tallies: one small module per name."""
