"""Integration tests against real third-party apps, each in a virtualenv of its own (noxfile.py)."""
