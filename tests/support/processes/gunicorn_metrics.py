"""gunicorn config of the metrics test: a worker that exits has its live gauges removed (multiprocess mode)."""

from prometheus_client import multiprocess


def child_exit(server, worker):
    multiprocess.mark_process_dead(worker.pid)
