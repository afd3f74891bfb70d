"""Storage backends of the throttle (Redis only for now)."""
