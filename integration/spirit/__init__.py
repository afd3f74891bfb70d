"""A small Spirit forum (django-spirit from the package index) limited by settings only.

Run with `make test-spirit` (the nox session `spirit`); the main suite never collects it.
"""
