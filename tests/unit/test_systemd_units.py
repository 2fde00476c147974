"""The shipped systemd units: hardened (exposure at most 2.0 in
``systemd-analyze security``), valid (``systemd-analyze verify`` in a root
where the paths they name exist, as the README installs them), and handing
secrets over as credentials, never through the environment."""

from __future__ import annotations

import configparser
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "systemd").glob("*.service"))
MAX_EXPOSURE = 2.0
DROP_INS = sorted((ROOT / "systemd/narad.service.d").glob("*.conf"))


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", *args], capture_output=True, text=True, timeout=60
    )


def service_section(unit: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(unit.read_text())
    return parser["Service"]


def test_every_unit_is_checked():
    assert {u.name for u in UNITS} == {
        "narad.service",
        "narad-storage.service",
        "narad-raft.service",
    }


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_unit_exposure_is_ok(unit):
    ran = analyze("security", "--offline=true", str(unit))
    found = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", ran.stdout)
    assert found, ran.stdout + ran.stderr
    assert float(found[1]) <= MAX_EXPOSURE, ran.stdout


@pytest.fixture(scope="module")
def system_root(tmp_path_factory) -> Path:
    """A root holding the distribution's units, ours installed as the README
    says, and a stand-in for every program they run."""
    root = tmp_path_factory.mktemp("root")
    shutil.copytree("/lib/systemd/system", root / "lib/systemd/system", symlinks=True)
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    for unit in UNITS:
        shutil.copy(unit, units)
    shutil.copytree(ROOT / "systemd/narad.service.d", units / "narad.service.d")
    for unit in UNITS:
        service = service_section(unit)
        for key in ("ExecStart", "ExecReload"):
            if key in service:
                program = root / service[key].split()[0].lstrip("/")
                program.parent.mkdir(parents=True, exist_ok=True)
                program.write_text("#!/bin/sh\n")
                program.chmod(stat.S_IRWXU)
    return root


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_unit_verifies_once_its_paths_exist(system_root, unit):
    ran = analyze("verify", f"--root={system_root}", unit.name)
    # A misspelt key is only a warning: none may be printed either.
    assert (ran.returncode, ran.stdout + ran.stderr) == (0, "")


def test_verify_would_notice_a_missing_program(system_root, tmp_path):
    broken = tmp_path / "root"
    shutil.copytree(system_root, broken, symlinks=True)
    (broken / "opt/narad/venv/bin/gunicorn").unlink()
    ran = analyze("verify", f"--root={broken}", "narad.service")
    assert ran.returncode != 0
    assert "gunicorn is not executable" in ran.stderr


def test_the_node_unit_notifies_and_stops_gracefully():
    service = service_section(ROOT / "systemd/narad.service")
    # Ready when a worker listens (narad.serve.server), which is not the main pid.
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "all")
    # SIGTERM to gunicorn's master only: it stops its workers gracefully.
    assert service["KillMode"] == "mixed"
    assert int(service["TimeoutStopSec"]) > 20  # gunicorn's graceful_timeout
    assert "gunicorn.conf.py" in service["ExecStart"]


@pytest.mark.parametrize("unit", UNITS + DROP_INS, ids=lambda u: u.name)
def test_no_unit_takes_secrets_from_the_environment(unit):
    text = unit.read_text()
    assert "EnvironmentFile" not in text
    for line in text.splitlines():
        if line.startswith("Environment="):
            assert not re.search(r"://[^/@\s]*:[^/@\s]+@|PASSWORD", line), line


def test_the_node_takes_its_secrets_as_credentials():
    loaded = {
        unit.name: [
            line.split("=", 1)[1].split(":", 1)
            for line in unit.read_text().splitlines()
            if line.startswith("LoadCredential=")
        ]
        for unit in (ROOT / "systemd/narad.service", *DROP_INS)
    }
    assert loaded["narad.service"] == [
        ["admin-password", "/etc/narad/credentials/admin-password"]
    ]
    assert ["storage-password", "/etc/narad/credentials/storage-password"] in (
        loaded["redisraft.conf"]
    )
    names = {name for pairs in loaded.values() for name, _ in pairs}
    assert {"tls-cert", "tls-key"} <= names


def test_the_tls_drop_in_points_the_node_at_its_credentials():
    text = (ROOT / "systemd/narad.service.d/tls.conf").read_text()
    settings = dict(
        line.removeprefix("Environment=").split("=", 1)
        for line in text.splitlines()
        if line.startswith("Environment=")
    )
    prefix = "/run/credentials/narad.service/"
    assert settings == {
        "NARAD_SERVER_TLS_CERT": prefix + "tls-cert",
        "NARAD_SERVER_TLS_KEY": prefix + "tls-key",
    }
