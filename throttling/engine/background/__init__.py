"""The background thread's parts, off the request path: the poller, the eviction watch, undoing timed-out writes, sending tasks."""
