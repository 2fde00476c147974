"""What ships: the built wheel and sdist against the source tree.

Every module of ``narad/`` and of each built-in plugin under ``plugins/``,
every Lua script and every other file a package directory holds must be in
the wheel (at its import path) and in the sdist (at its source path); the
wheel holds nothing else. ``scripts/release-check`` builds ``dist/`` and
serves from the wheel; here the same build is read (``NARAD_DIST_DIR``) or
made afresh.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Built by the compiler, or left by it: not source.
NOT_SOURCE = {".pyc", ".so", ".c"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    if given := os.environ.get("NARAD_DIST_DIR"):
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return out


def package_dirs() -> dict[Path, str]:
    """Each shipped top-level package's source directory, by import name."""
    found = {ROOT / "narad": "narad"}
    for entry in sorted((ROOT / "plugins").iterdir()):
        if entry.name.startswith("narad_") and (entry / "__init__.py").exists():
            found[entry] = entry.name
    return found


def source_files() -> dict[str, str]:
    """Every file that must ship: its path in the wheel -> its path in the tree."""
    files = {}
    for directory, name in package_dirs().items():
        for path in directory.rglob("*"):
            if (
                path.is_file()
                and "__pycache__" not in path.parts
                and path.suffix not in NOT_SOURCE
            ):
                inside = path.relative_to(directory).as_posix()
                files[f"{name}/{inside}"] = path.relative_to(ROOT).as_posix()
    return files


def test_the_tree_has_what_the_check_looks_for():
    files = source_files()
    assert "narad/security/authn.py" in files
    assert "narad_redis/scripts/append.lua" in files
    assert len([f for f in files if f.endswith(".lua")]) >= 17


def test_the_wheel_holds_every_module_script_and_data_file(dist):
    (wheel,) = dist.glob("narad-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    missing = sorted(
        source for inside, source in source_files().items() if inside not in shipped
    )
    assert not missing, f"{wheel.name} misses {', '.join(missing)}"


def test_the_wheel_holds_nothing_but_the_packages(dist):
    (wheel,) = dist.glob("narad-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    (info,) = {top for top in tops if top.endswith(".dist-info")}
    assert tops - {info} == set(package_dirs().values())
    stray = [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not stray


def test_the_sdist_builds_everything_the_wheel_holds(dist):
    (sdist,) = dist.glob("narad-*.tar.gz")
    with tarfile.open(sdist) as archive:
        prefix = archive.getnames()[0].split("/", 1)[0]
        shipped = {name.removeprefix(prefix + "/") for name in archive.getnames()}
    needed = {
        *source_files().values(),
        "narad/_datastack.c",
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "README.md",
        "LICENSE",
    }
    missing = sorted(needed - shipped)
    assert not missing, f"{sdist.name} misses {', '.join(missing)}"


def test_the_metadata_names_the_licence_and_pythons(dist):
    (wheel,) = dist.glob("narad-*.whl")
    info = wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"{info}/METADATA").decode()
        licence = archive.read(f"{info}/licenses/LICENSE").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Apache License" in licence and "Version 2.0" in licence
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata
    assert "Project-URL: Documentation" in metadata
    assert "Requires-Python: >=3.11" in metadata
