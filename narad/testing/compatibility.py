"""Check a pair of schemas with your plugins, as a schema change is checked.

For the tests of a compatibility rule plugin::

    import my_rules
    from narad.testing.compatibility import check_compatibility

    def test_dropping_x_sensitive_is_refused():
        [violation] = check_compatibility(
            '{"properties": {"ssn": {"x-sensitive": true}}}',
            '{"properties": {"ssn": {}}}',
            plugins={"my_rules": my_rules},
        )
        assert violation.pointer == "/properties/ssn"
        assert violation.keyword == "x-sensitive"

Without ``plugins``, the installed plugins apply (entry-point group
``narad``), as on a node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from narad.compatibility import Violation
from narad.plugins import Plugins
from narad.schema.compatibility import engine
from narad.schema.registration.documents import register
from narad.testing import load_plugins

__all__ = ("check_compatibility", "installed_plugins")


@cache
def installed_plugins() -> Plugins:
    """Every installed plugin and the built-ins, loaded once per process."""
    return load_plugins(entry_points=True)


def check_compatibility(
    old: str | bytes | Any,
    new: str | bytes | Any,
    *,
    plugins: Plugins | Mapping[str, object] | None = None,
    first: bool = False,
) -> list[Violation]:
    """Every way ``new`` could refuse a message ``old`` accepted, as Narad
    judges a schema change (``PATCH /v1/topics/{t}`` with ``schema``).

    Both documents are registered first, as a topic create or change would
    register them. A change to the same JSON value, or one only in
    annotations, registers nothing and has no violations.

    Args:
        old: The previous version: its JSON text (``str`` or ``bytes``, numbers
            kept exact), or a parsed document (a ``dict`` or ``True``).
        new: The proposed version, the same way.
        plugins: Your plugins by name (a module, or any object with hook
            implementations), added to the built-ins as
            :func:`narad.testing.load_plugins` adds them; or a loaded
            :class:`~narad.plugins.Plugins` set; by default
            :func:`installed_plugins`.
        first: Stop at the first violation, as a ``PATCH`` does; by default
            every violation is reported, as a dry run does.

    Returns:
        The violations (:class:`narad.compatibility.Violation`), in document
        order; empty when the change is compatible.

    Raises:
        narad.errors.InvalidSchema: a document Narad would not register.
        narad.errors.PluginError: ``plugins`` would stop a node's start-up.
    """
    if plugins is None:
        plugins = installed_plugins()
    elif not isinstance(plugins, Plugins):
        plugins = load_plugins(plugins)
    drafts, default = plugins.drafts()
    before = register(_text(old), drafts=drafts, default_draft=default)
    after = register(_text(new), drafts=drafts, default_draft=default)
    if engine.no_change(before.document, after.document, draft=before.draft):
        return []
    return engine.check(
        before.document,
        after.document,
        old_draft=before.draft,
        new_draft=after.draft,
        rules=plugins.compatibility_rules(),
        first=first,
    )


def _text(schema: str | bytes | Any) -> bytes:
    if isinstance(schema, bytes):
        return schema
    if isinstance(schema, str):
        return schema.encode()
    return json.dumps(schema).encode()
