"""What the tests share and the processes they start, in one place (fixtures are in tests/conftest.py).

helpers       assertions, waits, free_port, the Monitor of what clients send to Redis
penalties     the penalty modules' helpers: queued tasks, Redis keys, a run through the worker
report        offence and penalty rows for the report and its charts
topology      a local Redis Cluster and a Sentinel group
celery_app    the suite's Celery app; celery_worker starts it as a real worker process
policy_worker a process that reports the limit it sees (the policy cache tests)
escalating_site  a web process that crosses for many members and exits; the resync after a broker fault
fault_*       the gunicorn site of the HTTP fault and metrics tests; gunicorn starts and drives it
metrics       the throttle's Prometheus counts as changes, in one process or a multiprocess directory
gunicorn_metrics  the gunicorn config of the multiprocess metrics test (child_exit)
urls_*, views_*  URLconfs and views of the adapter and system-check tests
"""
