"""Content: what a post says made comparable, and decisions that judge it in the same script call."""
