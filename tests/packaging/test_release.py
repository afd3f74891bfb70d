"""What a release ships: the throttling package alone, at the one version the package names, with its changelog section."""

import configparser
import re
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
    stays out of the wheel: installed, it would be a top-level package of the user's environment."""
    exclude = set(_setup_cfg()["options.packages.find"]["exclude"].split())
    # What `packages = find:` finds at the top: every folder holding an __init__.py.
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert packages - exclude == {"throttling"}, sorted(packages - exclude)
    assert all(f"{name}.*" in exclude for name in packages - {"throttling"})  # with their subpackages


def test_the_version_is_written_in_one_place_and_the_changelog_has_its_section():
    assert _setup_cfg()["metadata"]["version"] == "attr: throttling.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", throttling.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(throttling.__version__)}\]", changelog, re.MULTILINE)
