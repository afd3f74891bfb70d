"""Offences: a refused attempt recorded, counted for the report, and escalated by task name."""
