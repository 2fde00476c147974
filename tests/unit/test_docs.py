"""The README stays short and the manual in docs/ stays whole.

`scripts/test` builds the site with ``mkdocs build --strict`` (broken links
and anchors fail there); these tests hold what a build does not check: the
README's length and links, every page in the nav, every setting documented,
and every section the README had before the manual moved to docs/ still
somewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from narad.config import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# Every heading of the README when the manual moved to docs/ (29c4a98), and
# the page that holds it now ("README" when it stayed there), with its new
# heading where it was renamed.
MOVED: dict[str, str | tuple[str, str]] = {
    "Narad for Python": "README",
    "Two commands": "README",
    "Walkthrough": "README",
    "Fan-out and delay children": "fanout.md",
    "Compatibility modes and the dry run": "schemas.md",
    "Running it for real": ("running.md", "Running it"),
    "Installing it with systemd": "running.md",
    "Memory": "memory.md",
    "Security": "security.md",
    "The root admin": "security.md",
    "Grants and ownership": "security.md",
    "Users API": "security.md",
    "Passwords and credential checks": "security.md",
    "Failed logins": "security.md",
    "Access log and request ids": "operating.md",
    "TLS": "security.md",
    "Turning it off": "security.md",
    "Operating it": "operating.md",
    "The `narad` command line": "operating.md",
    "Metrics, dashboard and alerts": "operating.md",
    "Logs": "operating.md",
    "Delivery": "delivery.md",
    "Produce": "delivery.md",
    "Consume and ack": "delivery.md",
    "Batches": "delivery.md",
    "Storage": "storage.md",
    "The embedded server": "storage.md",
    "An external server": "storage.md",
    "A RedisRaft cluster": "storage.md",
    "Durability": "storage.md",
    "When the storage is full": "storage.md",
    "Errors": "errors.md",
    "Why its own validator": "schemas.md",
    "Layout": "layout.md",
    "Plugins": "plugins.md",
    "Public modules and the compatibility promise": "plugins.md",
    "A compatibility rule for your own keyword": "plugins.md",
    "How the compatibility check reads the rulebook": "schemas.md",
    "A storage backend": "plugins.md",
    "Settings": "plugins.md",
    "Testing a plugin": "plugins.md",
}


def headings(text: str) -> set[str]:
    """Markdown headings outside code fences, without their `{#id}`."""
    found, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.*)", line)):
            found.add(re.sub(r"\s*\{#[^}]*\}$", "", m.group(1)).strip())
    return found


def nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        if isinstance(entry, str):
            pages.append(entry)
        else:
            for value in entry.values():
                pages += [value] if isinstance(value, str) else nav_pages(value)
    return pages


def mkdocs_config() -> dict:
    # mkdocs.yml holds no custom YAML tags, so the safe loader reads it.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= 260, f"README.md has {lines} lines: move detail to docs/"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages(mkdocs_config()["nav"])
    on_disk = [str(p.relative_to(DOCS)) for p in doc_pages()]
    assert sorted(nav) == sorted(on_disk)
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_the_readme_links_to_docs_pages_that_exist():
    text = README.read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert links, "the README links to no page of docs/"
    for path, anchor in links:
        page = ROOT / path
        assert page.is_file(), f"README links to {path}, which does not exist"
        if anchor:
            slugs = {slug(h) for h in headings(page.read_text())}
            slugs |= set(re.findall(r"\{#([\w-]+)\}", page.read_text()))
            assert anchor in slugs, f"README links to {path}#{anchor}"


def slug(heading: str) -> str:
    """The anchor mkdocs' toc extension gives a heading (its default)."""
    text = re.sub(r"[^\w\s-]", "", heading.lower()).strip()
    return re.sub(r"[-\s]+", "-", text)


def test_every_setting_is_documented():
    documented = "\n".join(p.read_text() for p in doc_pages())
    documented += (ROOT / "conf" / "narad.toml").read_text()
    for setting in SETTINGS:
        section, name = setting.key.rsplit(".", 1)
        # conf/narad.toml names it under its [section]; prose names it whole.
        in_toml = re.search(
            rf"^\[{re.escape(section)}\][^\[]*^#?\s*{re.escape(name)}\s*=",
            documented,
            re.MULTILINE,
        )
        assert setting.key in documented or in_toml, setting.key


@pytest.mark.parametrize("heading", sorted(MOVED))
def test_every_section_of_the_old_readme_has_a_home(heading):
    page = MOVED[heading]
    if isinstance(page, tuple):
        page, heading = page
    where = README if page == "README" else DOCS / page
    assert heading in headings(where.read_text()), f"{heading!r} is not in {page}"


def test_every_benchmark_section_is_well_formed():
    text = (DOCS / "benchmarks.md").read_text()
    starts = re.findall(r"<!-- bench:([\w-]+) -->", text)
    ends = re.findall(r"<!-- /bench:([\w-]+) -->", text)
    assert starts and starts == ends
    assert len(starts) == len(set(starts))
