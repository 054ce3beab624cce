"""dials: one small module per name."""
