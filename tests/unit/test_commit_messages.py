"""Commit messages since CONTRIBUTING.md was added follow it: a capitalised
subject of at most 72 characters without a full stop, and a blank line
before any body."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUBJECT_MAX = 72


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout


def commits_since_contributing() -> list[tuple[str, str]]:
    """(sha, whole message) of CONTRIBUTING.md's commit and every later one."""
    added = git("log", "--diff-filter=A", "--format=%H", "--", "CONTRIBUTING.md")
    first = added.split()[-1]
    shas = git("rev-list", "--reverse", f"{first}^..HEAD").split()
    return [(sha, git("log", "-1", "--format=%B", sha)) for sha in shas]


def test_the_history_is_here_to_check():
    assert shutil.which("git")
    assert commits_since_contributing()


def test_commit_subjects_are_short_capitalised_lines():
    bad = []
    for sha, message in commits_since_contributing():
        subject, *rest = message.rstrip("\n").split("\n")
        problems = []
        if len(subject) > SUBJECT_MAX:
            problems.append(f"{len(subject)} characters")
        if not subject[:1].isupper():
            problems.append("not capitalised")
        if subject.endswith("."):
            problems.append("ends with a full stop")
        if rest and rest[0].strip():
            problems.append("no blank line after the subject")
        if problems:
            bad.append(f"{sha[:10]} {subject!r}: {', '.join(problems)}")
    assert not bad, "\n".join(bad)
