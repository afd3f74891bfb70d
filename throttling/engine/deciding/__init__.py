"""Deciding: what one decision sends to Redis, and what the reply means."""
