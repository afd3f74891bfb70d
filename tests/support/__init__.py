"""What the tests share and the processes they start, grouped by what they support (fixtures are in
tests/conftest.py).

helpers       assertions, waits, free_port, the Monitor of what clients send to Redis
fixtures      fixtures the main suite and the integrations share
penalties     the penalty modules' helpers: queued tasks, Redis keys, a run through the worker
report        offence and penalty rows for the report and its charts
history       histories of an action as a community leaves them (the replay tests)
traffic       load: forked processes racing on one identity, threads deciding meanwhile
metrics       the throttle's Prometheus counts as changes, in one process or a multiprocess directory
refusals      the 429 page of a refused post, read as a browser would send its form
browser       the system Chromium, signing in, page widths, screenshots
integration   fixtures of the integration tests on apps from the package index

processes/    what the tests start in other processes: topology (a local Redis Cluster and a Sentinel
              group), celery_app and celery_worker (the suite's Celery app, run as a real worker),
              gunicorn and gunicorn_metrics, site_process (a web server of one of the sites),
              policy_worker and metrics_process (processes that report what they see)
sites/        small sites served in other processes: asgi/ (uvicorn), fault/ (gunicorn under Redis
              faults), escalating (crosses for many members and exits), forum/ (a tiny forum app)
urlconfs/     URLconfs and views of the in-process tests: adapters, checks, content, forum, notices,
              catch_all
"""
