"""What a release ships: the throttling package alone, at the one version the package names, with its changelog section."""

import configparser
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

import throttling

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_independent


def _setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    return parser


def test_the_distribution_holds_the_throttling_package_alone():
    """Every other folder with Python in it (the demo, the tests, the benchmark, the integration apps)
    stays out of the wheel: installed, it would be a top-level package of the user's environment. The
    data folders inside throttling (templates, Lua scripts, static files, catalogues) are found as the
    namespace packages they are, so setuptools ships them as package data without a warning."""
    options = _setup_cfg()
    assert options["options"]["packages"] == "find_namespace:"
    include = options["options.packages.find"]["include"].split()
    assert include == ["throttling", "throttling.*"]

    def shipped(name):
        return any(fnmatch(name, pattern) for pattern in include)

    # Every folder at the top with Python in it but throttling stays out, with its subfolders.
    others = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"throttling"}
    assert others and not any(shipped(name) or shipped(f"{name}.sub") for name in others), sorted(others)
    # The data folders are found as packages of throttling.
    for folder in ("backends/lua", "templates/throttling", "templates/admin/throttling", "static/throttling", "locale"):
        assert (ROOT / "throttling" / folder).is_dir() and shipped("throttling." + folder.replace("/", ".")), folder


def test_the_version_is_written_in_one_place_and_the_changelog_has_its_section():
    assert _setup_cfg()["metadata"]["version"] == "attr: throttling.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", throttling.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(throttling.__version__)}\]", changelog, re.MULTILINE)
