"""GRPO++ training: advantages, the clipped-surrogate loss, chunked log-probs, batch assembly."""
