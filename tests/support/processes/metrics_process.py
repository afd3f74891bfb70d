"""A process counting decisions in multiprocess mode, for tests/metrics: `python -m tests.support.processes.metrics_process MODE`.

Run with PROMETHEUS_MULTIPROC_DIR and DJANGO_SETTINGS_MODULE=tests.settings set. Its threads call the
decision hook THREADS * PER_THREAD times, then it prints its pid, and:
- "wait": waits for its stdin to close (the background thread writes the counts meanwhile), then exits;
- "view": writes nothing by itself (the background thread's interval made an hour), but serves
  metrics_view once and prints the decisions it shows, then exits;
- "exit": writes nothing before it exits (the background thread's interval made an hour), but first
  forks a child that counts CHILD_DECISIONS of its own, prints the child's pid and waits for it.
"""

import os
import sys
import threading
import warnings

import django

THREADS = 4
PER_THREAD = 5000
CHILD_DECISIONS = 7


def main(mode):
    django.setup()
    from django.test.utils import override_settings

    from throttling import metrics
    from throttling.common import observe
    from throttling.engine.decision import Decision

    override_settings(THROTTLING_METRICS=True).enable()
    if mode in ("view", "exit"):
        metrics.export.FLUSH_EVERY = 3600
    decision = Decision(True, "reply")

    def count(n):
        for _ in range(n):
            observe.decided(decision, 0.00003)

    threads = [threading.Thread(target=count, args=(PER_THREAD,)) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(os.getpid(), flush=True)
    if mode == "wait":
        sys.stdin.read()
        return
    if mode == "view":
        from django.test import RequestFactory
        from prometheus_client.parser import text_string_to_metric_families

        page = metrics.metrics_view(RequestFactory().get("/metrics/")).content.decode()
        shown = [f for f in text_string_to_metric_families(page) if f.name == "throttling_decisions"]
        print(int(sum(s.value for f in shown for s in f.samples if s.name == "throttling_decisions_total")))
        return
    # The fork is what is tested, with the background thread running: Python 3.12+ warns of any
    # fork in a process with threads (the child runs none of the parent's threads but its own).
    warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning)
    child = os.fork()
    if child == 0:
        count(CHILD_DECISIONS)
        sys.exit(0)  # the interpreter's exit: what the child counted is written then
    print(child, flush=True)
    os.waitpid(child, 0)


if __name__ == "__main__":
    main(sys.argv[1])
