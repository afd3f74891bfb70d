"""Small sites the tests serve in other processes (ASGI, gunicorn faults, escalation) and the forum app."""
