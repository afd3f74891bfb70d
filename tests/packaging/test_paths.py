"""Import paths a project written against an earlier release uses: the documented entry points, and every
module that moved when the package was laid out by feature (see Architecture › Moved modules)."""

import importlib
import subprocess
import sys
import warnings

import pytest

from throttling.common.moved import MOVED, REPLACED

DOCUMENTED = {
    "throttling.middleware": ["ActionThrottleMiddleware"],
    "throttling.throttles": ["ActionThrottle"],
    "throttling.decorators": ["throttle_action"],
    "throttling.notices": ["PenaltyNoticeMiddleware", "context_processor"],
}


@pytest.mark.parametrize("path,names", sorted(DOCUMENTED.items()))
def test_the_documented_entry_points_import_without_a_warning(path, names):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(path)
    for name in names:
        assert callable(getattr(module, name))
    adapter = importlib.import_module(MOVED_ADAPTERS[path])
    assert all(getattr(module, name) is getattr(adapter, name) for name in names)


MOVED_ADAPTERS = {
    "throttling.middleware": "throttling.adapters.middleware",
    "throttling.throttles": "throttling.adapters.drf",
    "throttling.decorators": "throttling.adapters.decorators",
    "throttling.notices": "throttling.adapters.penalty_notices",
}


@pytest.mark.parametrize("old,new", sorted(MOVED.items()))
def test_a_moved_module_imports_by_its_old_path_as_the_same_module_with_a_warning(old, new):
    # A fresh interpreter: this one may have imported the old path already (once imported, a module
    # is not found again, so it warns once per process).
    code = (
        "import warnings, importlib, django, sys\n"
        "warnings.simplefilter('always')\n"
        "django.setup()\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        f"assert any(w.category is DeprecationWarning and {new!r} in str(w.message) for w in seen), seen\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_name_from_an_old_path_is_the_name_at_the_new_one():
    with pytest.warns(DeprecationWarning, match="throttling.common.words"):
        sys.modules.pop("throttling.text", None)
        from throttling.text import local_time
    from throttling.common.words import local_time as current

    assert local_time is current


def test_a_path_that_never_existed_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("throttling.no_such_module")


@pytest.mark.parametrize("package,module", sorted(REPLACED.items()))
def test_a_package_that_took_a_modules_path_forwards_its_names_with_a_warning(package, module):
    replaced = importlib.import_module(module)
    name = next(n for n in vars(replaced) if not n.startswith("_") and callable(getattr(replaced, n)))
    with pytest.warns(DeprecationWarning, match=module):
        value = getattr(importlib.import_module(package), name)
    assert value is getattr(replaced, name)
    with pytest.raises(AttributeError):
        importlib.import_module(package).no_such_name  # noqa: B018
