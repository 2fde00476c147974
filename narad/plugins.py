"""The plugin host: finds plugins, checks them, and merges what they provide.

Built-in plugins live under ``plugins/`` as ordinary distributions' modules
and are declared in setup.cfg under the entry-point group ``narad``, exactly
as a third-party plugin is. :data:`DEFAULT_PLUGINS` lists the same modules so
that a checkout run without installing still has them; a module already
registered through its entry point is not registered twice.

What plugins hand back is called on clients' input (payload strings reach
format checkers, proposed schemas reach compatibility rules), so the host
contains their failures: an exception from a format checker means the value
is not valid in that format, and one from a rule refuses the schema change
(400, naming the keyword), instead of ending the request with a 500.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING
from typing import Any

import pluggy

from narad import hookspecs
from narad.errors import IncompatibleSchema
from narad.errors import NaradError
from narad.errors import PluginConflict
from narad.errors import PluginError

if TYPE_CHECKING:
    from narad.config import Config
    from narad.schema.drafts import Draft
    from narad.storage import Storage

log = logging.getLogger(__name__)

# Format checkers that raised at least once in this process (logged once).
_REPORTED: set[str] = set()

DEFAULT_PLUGINS: tuple[str, ...] = (
    "narad_redis",
    "narad_fakeredis",
    "narad_draft202012",
    "narad_draft201909",
    "narad_draft7",
    "narad_draft6",
    "narad_draft4",
    "narad_formats",
    "narad_rules_types",
    "narad_rules_bounds",
    "narad_rules_strings",
    "narad_rules_objects",
    "narad_rules_arrays",
    "narad_rules_combinators",
    "narad_rules_refs",
)


def get_plugin_manager(
    *, disabled: Iterable[str] = (), load_entry_points: bool = True
) -> pluggy.PluginManager:
    """Build a plugin manager: entry points first, then the built-ins.

    Args:
        disabled: Plugin names (entry-point or module names) never to load.
        load_entry_points: False gives a manager with built-ins only, for
            tests that must not see whatever else is installed.

    Raises:
        PluginError: a plugin cannot be imported or its hooks do not match
            the specs; the message names the plugin.
    """
    pm = pluggy.PluginManager(hookspecs.NAME)
    pm.add_hookspecs(hookspecs)
    for name in disabled:
        pm.set_blocked(name)
    if load_entry_points:
        for ep in entry_points(group=hookspecs.NAME):
            if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
                continue
            origin = f"entry point {ep.name!r} ({ep.value}"
            origin += f", distribution {ep.dist.name})" if ep.dist else ")"
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(f"plugin {origin} failed to load: {exc!r}") from exc
            _register(pm, plugin, ep.name, origin)
    for name in DEFAULT_PLUGINS:
        if pm.is_blocked(name) or pm.has_plugin(name):
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise PluginError(
                f"built-in plugin {name!r} failed to load: {exc!r}"
            ) from exc
        _register(pm, module, name, f"built-in plugin {name!r}")
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {exc.plugin!r} has an unknown hook: {exc}") from exc
    return pm


def _register(pm: pluggy.PluginManager, plugin: Any, name: str, origin: str) -> None:
    try:
        pm.register(plugin, name=name)
    except (ValueError, pluggy.PluginValidationError) as exc:
        raise PluginError(f"{origin} cannot be registered: {exc}") from exc


class Plugins:
    """A typed facade over the hooks: one method per hook, merged by key."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm

    def drafts(self) -> tuple[dict[str, Draft], Draft]:
        """Return drafts by ``$schema`` URI, and the default draft."""
        by_uri: dict[str, Draft] = {}
        owners: dict[str, str] = {}
        default: tuple[str, Draft] | None = None
        for plugin, drafts in self._call("narad_json_schema_drafts"):
            for draft in drafts:
                for uri in draft.uris:
                    _claim(owners, uri, plugin, "the $schema URI")
                    by_uri[uri] = draft
                if draft.default:
                    if default is not None:
                        raise PluginConflict(
                            f"plugins {default[0]!r} and {plugin!r} both claim "
                            "the default draft"
                        )
                    default = (plugin, draft)
        if default is None:
            raise PluginError("no plugin provides the default JSON Schema draft")
        return by_uri, default[1]

    def format_checkers(self) -> dict[str, Callable[[str], bool]]:
        """Return checkers by format name; one that raises answers "not valid"."""
        merged = self._merge("narad_format_checkers", "the format")
        return {name: _contained_checker(name, check) for name, check in merged.items()}

    def compatibility_rules(self) -> dict[str, Callable[..., Any]]:
        """Return rules by keyword; one that raises refuses the change (400)."""
        merged = self._merge("narad_compatibility_rules", "the keyword")
        return {
            keyword: _contained_rule(keyword, rule) for keyword, rule in merged.items()
        }

    def storage_backends(self) -> dict[str, Callable[[str, Config], Storage]]:
        return self._merge("narad_storage_backends", "the storage URL scheme")

    def _merge(self, hook: str, what: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        owners: dict[str, str] = {}
        for plugin, mapping in self._call(hook):
            for key, value in mapping.items():
                _claim(owners, key, plugin, what)
                merged[key] = value
        return merged

    def _call(self, hook: str) -> list[tuple[str, Any]]:
        """Call every implementation of ``hook`` and pair answers with plugins."""
        answers = []
        for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):
            try:
                answer = impl.function()
            except Exception as exc:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} failed in {hook}: {exc!r}"
                ) from exc
            if answer is not None:
                answers.append((impl.plugin_name, answer))
        return answers


def _contained_checker(
    name: str, check: Callable[[str], bool]
) -> Callable[[str], bool]:
    @functools.wraps(check)
    def contained(value: str) -> bool:
        try:
            return bool(check(value))
        except Exception:
            # The client chose the string: log without it, once per process
            # and checker, so hostile payloads cannot flood the log.
            if name not in _REPORTED:
                _REPORTED.add(name)
                log.exception(
                    "format checker %r raised; the value counts as invalid", name
                )
            return False

    return contained


def _contained_rule(keyword: str, rule: Callable[..., Any]) -> Callable[..., Any]:
    # wraps() copies the rule's marks (extension, document_keyword).
    @functools.wraps(rule)
    def contained(old: Any, new: Any, ctx: Any) -> list[Any]:
        try:
            return list(rule(old, new, ctx))
        except NaradError:
            raise  # a nested rule's refusal, already contained
        except Exception as exc:
            log.exception("compatibility rule for %r raised", keyword)
            raise IncompatibleSchema(
                f"schema: the compatibility rule for {keyword!r} failed on this "
                f"change ({type(exc).__name__}), so the change is refused"
            ) from None

    return contained


def _claim(owners: dict[str, str], key: str, plugin: str, what: str) -> None:
    if key in owners and owners[key] != plugin:
        raise PluginConflict(
            f"plugins {owners[key]!r} and {plugin!r} both claim {what} {key!r}"
        )
    owners[key] = plugin


def load_plugins(config: Config | None = None) -> Plugins:
    """The :class:`Plugins` for a process, honouring ``plugins.disabled``."""
    disabled: Mapping[str, Any] | Iterable[str] = ()
    if config is not None:
        disabled = config.plugins_disabled
    return Plugins(get_plugin_manager(disabled=disabled))
