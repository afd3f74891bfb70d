"""The house rules a reader relies on: no merge leftovers in the tree, no module holding two ideas."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "throttling"
# A module past this many lines holds two ideas: split it by topic where a reader would look.
MAX_LINES = 400
LEFTOVERS = (".orig", ".rej")


def _tracked_files():
    """The repository's files as git knows them, or every file under ROOT outside a git checkout (an sdist)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError):
        ignored = {".git", ".venv", ".nox", "node_modules", "site", "build", "dist"}
        return [p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file() and not ignored & set(p.parts)]
    return [Path(name) for name in out.stdout.decode().split("\0") if name]


def leftovers(paths):
    return sorted(str(p) for p in paths if p.suffix in LEFTOVERS)


def long_modules(package, limit=MAX_LINES):
    found = []
    for path in sorted(package.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append((str(path.relative_to(package.parent)), lines))
    return found


def test_no_merge_leftovers_are_tracked():
    assert leftovers(_tracked_files()) == []


def test_a_merge_leftover_is_found():
    assert leftovers([Path("throttling/admin/charts.py.orig"), Path("a.py"), Path("b/c.rej")]) == [
        "b/c.rej",
        "throttling/admin/charts.py.orig",
    ]


def test_no_module_of_the_package_is_over_the_limit():
    assert long_modules(PACKAGE) == []


@pytest.mark.parametrize("lines,found", [(MAX_LINES, False), (MAX_LINES + 1, True)])
def test_a_long_module_is_found(tmp_path, lines, found):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "big.py").write_text("x = 1\n" * lines, encoding="utf-8")
    assert bool(long_modules(package)) is found


# The tree shows the architecture (see Architecture › The tree): few loose modules at the top, no folder
# that is two rooms.
MAX_LOOSE = 10
MAX_MODULES = 12


def crowded_folders(package, limit=MAX_MODULES):
    """(folder, modules directly in it) past `limit`, migrations aside; __init__.py is not counted."""
    found = []
    for folder in sorted([package, *(p for p in package.rglob("*") if p.is_dir())]):
        if "migrations" in folder.parts or "__pycache__" in folder.parts:
            continue
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > limit:
            found.append((str(folder.relative_to(package.parent)), len(modules)))
    return found


def test_the_package_root_holds_at_most_ten_loose_modules():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE, loose


def test_no_folder_of_the_package_holds_more_than_twelve_modules():
    assert crowded_folders(PACKAGE) == []


def test_a_crowded_folder_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "room").mkdir(parents=True)
    for n in range(MAX_MODULES + 1):
        (package / "room" / f"m{n}.py").write_text("", encoding="utf-8")
    assert crowded_folders(package) == [("pkg/room", MAX_MODULES + 1)]
