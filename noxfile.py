"""The test suite on each supported Python/Django pair, each in a virtualenv of its own.

    nox -l                                  # the sessions
    nox -s "tests-3.13(django='6.1')"       # one leg; `nox -s tests-3.13` selects it too
    nox -s tests-3.12 -- -q -k redis_url    # arguments after -- go to pytest
    nox -s spirit                           # the integration test on django-spirit (integration/spirit)
    nox -k "comments or machina"            # ... on django-contrib-comments and django-machina, every leg

Each leg installs the app with the drf, celery and metrics extras and the test tools pinned in
requirements.txt, with Django replaced by the leg's release series. The interpreters are
found on PATH as python3.X; when that is missing (or is a pyenv shim for a version that
is not selected), the newest $(pyenv root)/versions/3.X.* is used (PYENV_ROOT, `pyenv root`,
else ~/.pyenv).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import nox

# uv makes and fills each session's virtualenv in a tenth of pip's time (CI makes eleven of them);
# venv and pip when uv is missing. uv never downloads an interpreter: the legs use the ones found
# below, and a missing one fails its leg.
nox.options.default_venv_backend = "uv|venv"
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
# uv, unlike pip, writes no bytecode at install: each process writes what it imports on first
# import. Where PYTHONDONTWRITEBYTECODE is set, every process the tests start (Celery workers,
# gunicorn, the demo) would compile Django anew, so CI (.ci/run) unsets it; compiling every installed
# package at install instead would cost the short sessions more than they save.
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).resolve().parent

# (Python, Django release series): the development pair, then the 6.x releases (which need Python >= 3.12).
LEGS = [("3.11", "5.2"), ("3.12", "6.0"), ("3.13", "6.1")]

# What each session installs the app from: the checkout, or the wheel THROTTLING_WHEEL names. CI
# builds that wheel once and runs sessions side by side: two installs from the checkout at once
# would build it in the same build/ folder. Every session installs f"{PACKAGE}[extras]", never ".".
PACKAGE = os.environ.get("THROTTLING_WHEEL") or "."

# Lines of requirements.txt a leg does not take from there: the app itself, the Django pin, nox.
_NOT_PINNED_HERE = re.compile(r"^(-e\s|\.|django==|nox==)", re.IGNORECASE)


def _works(command):
    try:
        return subprocess.run([command, "-c", ""], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pyenv_root():
    root = os.environ.get("PYENV_ROOT")
    if root:
        return Path(root)
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    default = Path.home() / ".pyenv"  # pyenv's default root, when pyenv itself is not on PATH
    return default if default.is_dir() else None


def _version_key(path):
    return tuple(int(part) if part.isdigit() else -1 for part in re.split(r"[.]", path.parent.name))


def _find_interpreters():
    """Put a pyenv-installed python3.X first on PATH for every leg's X that PATH does not run."""
    root = None
    for python, _ in LEGS:
        command = f"python{python}"
        if _works(command):
            continue
        root = root or _pyenv_root()
        if root is None:
            continue
        found = sorted((root / "versions").glob(f"{python}.*/bin/{command}"), key=_version_key)
        found = [path for path in found if re.fullmatch(rf"{re.escape(python)}\.\d+", path.parent.parent.name)]
        if found:
            os.environ["PATH"] = f"{found[-1].parent}{os.pathsep}{os.environ.get('PATH', '')}"


_find_interpreters()


def _requirement_lines():
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in (line.split("#", 1)[0].strip() for line in lines) if line]


def _test_requirements():
    return [line for line in _requirement_lines() if not _NOT_PINNED_HERE.match(line)]


def _pins(*names):
    """requirements.txt's pins of `names` (name==version lines), in that order."""
    pins = {line.split("==", 1)[0].lower(): line for line in _requirement_lines() if "==" in line}
    return [pins[name.lower()] for name in names]


def _leg(python, django):
    @nox.session(name=f"tests-{python}", python=python)
    @nox.parametrize("django", [django])
    def tests(session, django):
        """The full suite (SQLite unless DATABASE_URL is set) on one Python/Django pair."""
        session.install(f"{PACKAGE}[drf,celery,metrics]", *_test_requirements(), f"Django~={django}.0")
        session.run(
            "python", "-c", "import django, sys; print(f'Python {sys.version.split()[0]}, Django {django.__version__}')"
        )
        session.run("python", "-m", "pytest", *session.posargs)

    return tests


# One session per leg: tests-3.11(django='5.2'), tests-3.12(django='6.0'), tests-3.13(django='6.1').
for _python, _django in LEGS:
    _leg(_python, _django)


# The third-party forum the integration test runs against, and the Django it runs on (Spirit 0.14
# supports Django < 6, so the development pair's pin).
SPIRIT = "django-spirit==0.14.3"


@nox.session(name="spirit", python="3.11")
def spirit(session):
    """integration/spirit: a real Spirit forum from the package index, limited by settings only."""
    session.install(
        f"{PACKAGE}[drf,celery]", SPIRIT, *_pins("Django", "redis", "hiredis", "celery", "pytest", "pytest-django")
    )
    session.run(
        "python", "-c", "import django, spirit; print(f'Django {django.__version__}, Spirit {spirit.__version__}')"
    )
    session.run("python", "-m", "pytest", "integration/spirit", "--ds=integration.spirit.settings", *session.posargs)


# Two more apps from the package index, bound by settings only (integration/comments, integration/machina).
# Neither caps Django in its metadata (comments: Django>=2.2, machina: django>=3.2): each runs on every
# release series of the matrix, with that leg's Python.
OTHER_APPS = {"comments": ["django-contrib-comments==2.2.0"], "machina": ["django-machina==1.3.1"]}


def _other_app(name, packages, python, django):
    @nox.session(name=f"{name}-{python}", python=python)
    @nox.parametrize("django", [django])
    def session(session, django):
        """An integration test on a real app from the package index, limited by settings only."""
        # demo_site (whose helpers the tests share) loads its Celery app on import.
        session.install(
            f"{PACKAGE}[celery]",
            *packages,
            *_pins("redis", "hiredis", "celery", "pytest", "pytest-django"),
            f"Django~={django}.0",
        )
        session.run(
            "python", "-m", "pytest", f"integration/{name}", f"--ds=integration.{name}.settings", *session.posargs
        )

    return session


for _name, _packages in OTHER_APPS.items():
    for _python, _django in LEGS:
        _other_app(_name, _packages, _python, _django)
