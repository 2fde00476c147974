"""The plugin host: finds plugins, checks what they provide, and merges it.

Built-in plugins live under ``plugins/`` as ordinary distributions' modules
and are declared in setup.cfg under the entry-point group ``narad``, exactly
as a third-party plugin is. :data:`DEFAULT_PLUGINS` lists the same modules so
that a checkout run without installing still has them; a module already
registered through its entry point is not registered twice.

Every hook is called through pluggy with keyword arguments, one plugin at a
time, so each answer is credited to the plugin that gave it: conflicts name
both plugins, a malformed answer names its plugin, and ``narad plugins`` lists
what each plugin claims. ``NARAD_TRACE_PLUGINS=1`` writes every hook call and
its outcome to standard error.

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
import os
import re
import reprlib
import sys
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from importlib.metadata import packages_distributions
from importlib.metadata import version as distribution_version
from typing import TYPE_CHECKING
from typing import Any
from urllib.parse import urlsplit

import pluggy

from narad import __version__
from narad import hookspecs
from narad.config import Setting
from narad.config import valid_section
from narad.errors import CompatibilityRuleFailed
from narad.errors import InvalidConfiguration
from narad.errors import NaradError
from narad.errors import PluginConflict
from narad.errors import PluginError
from narad.schema.drafts import Draft

if TYPE_CHECKING:
    from narad.config import Config
    from narad.schematypes import SchemaType
    from narad.storage import Storage

log = logging.getLogger(__name__)

TRACE_ENV = "NARAD_TRACE_PLUGINS"

# Format checkers that raised at least once in this process (logged once).
_REPORTED: set[str] = set()

DEFAULT_PLUGINS: tuple[str, ...] = (
    "narad_redis",
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
    "narad_jsonschema",
    "narad_avro",
    "narad_protobuf",
)


def get_plugin_manager(
    *,
    disabled: Iterable[str] = (),
    load_entry_points: bool = True,
    extra: Mapping[str, object] | None = None,
) -> pluggy.PluginManager:
    """Build a plugin manager: entry points, then the built-ins, then ``extra``.

    Args:
        disabled: Plugin names (entry-point or module names) never to load.
        load_entry_points: False gives a manager with built-ins only, for
            tests that must not see whatever else is installed.
        extra: More plugins by name (modules, objects with hook
            implementations, or a module's dotted name to import), as tests
            register the plugin under test.

    Raises:
        PluginError: a plugin cannot be imported or its hooks do not match
            the specs; the message names the plugin.
    """
    pm = pluggy.PluginManager(hookspecs.NAME)
    pm.add_hookspecs(hookspecs)
    found = list(entry_points(group=hookspecs.NAME)) if load_entry_points else []
    known = {ep.name for ep in found} | set(DEFAULT_PLUGINS) | set(extra or {})
    for name in disabled:
        pm.set_blocked(name)
        if name not in known:
            # A misspelt name would leave the plugin meant running: say so.
            log.warning(
                "plugins.disabled names %r, which is no plugin here: it "
                "disables nothing",
                name,
            )
    if load_entry_points:
        for ep in found:
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
    for name, plugin in (extra or {}).items():
        if pm.is_blocked(name):
            continue
        if isinstance(plugin, str):  # a module's name, imported as built-ins are
            try:
                plugin = importlib.import_module(plugin)
            except Exception as exc:
                raise PluginError(f"plugin {name!r} failed to load: {exc!r}") from exc
        _register(pm, plugin, name, f"plugin {name!r}")
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {exc.plugin!r} has an unknown hook: {exc}") from exc
    if os.environ.get(TRACE_ENV, "") not in ("", "0"):
        pm.add_hookcall_monitoring(_trace_before, _trace_after)
    return pm


def _register(pm: pluggy.PluginManager, plugin: Any, name: str, origin: str) -> None:
    try:
        pm.register(plugin, name=name)
    except (ValueError, pluggy.PluginValidationError) as exc:
        raise PluginError(f"{origin} cannot be registered: {exc}") from exc


def _trace_before(hook: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    arguments = ", ".join(f"{k}={reprlib.repr(v)}" for k, v in kwargs.items())
    plugins = ", ".join(impl.plugin_name for impl in impls)
    print(f"narad: hook {hook}({arguments}) -> {plugins}", file=sys.stderr)


def _trace_after(
    outcome: pluggy.Result[Any],
    hook: str,
    impls: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> None:
    if outcome.exception is not None:
        said = f"raised {outcome.exception!r}"
    else:
        said = f"returned {reprlib.repr(outcome.get_result())}"
    print(f"narad: hook {hook} {said}", file=sys.stderr)


@dataclass(frozen=True)
class PluginInfo:
    """What ``narad plugins`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    hooks: tuple[str, ...]
    drafts: tuple[str, ...]
    formats: tuple[str, ...]
    keywords: tuple[str, ...]
    schemes: tuple[str, ...]
    settings: tuple[str, ...]
    types: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: the plugin, its distribution, and what it claims."""
        origin = f"{self.distribution} {self.version}".strip() or "not installed"
        sections: dict[str, list[str]] = {}
        for key in self.settings:
            section, _, name = key.rpartition(".")
            sections.setdefault(section, []).append(name)
        claims = [
            f"{label} {', '.join(values)}"
            for label, values in (
                ("drafts", self.drafts),
                ("formats", self.formats),
                ("rule keywords", self.keywords),
                ("storage schemes", self.schemes),
                ("schema types", self.types),
            )
            if values
        ] + [f"settings [{s}] {', '.join(names)}" for s, names in sections.items()]
        return f"{self.name} ({origin}): " + ("; ".join(claims) or "claims nothing")


class Plugins:
    """A typed facade over the hooks: one method per hook, merged by key.

    Answers are collected once and checked as they are; :meth:`check` asks
    every hook, so a node that starts has plugins whose answers all hold.
    """

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self._answers: dict[str, list[tuple[str, Any]]] = {}

    # -- the hooks -----------------------------------------------------------

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

    def schema_types(self) -> dict[str, SchemaType]:
        """Return schema types by name (``JSON``, ``AVRO``, ...), as given
        (unbound: the schema service binds each to these plugins)."""
        merged: dict[str, SchemaType] = {}
        owners: dict[str, str] = {}
        for plugin, types in self._call("narad_schema_types"):
            for schema_type in types:
                _claim(owners, schema_type.name, plugin, "the schema type")
                merged[schema_type.name] = schema_type
        return merged

    def storage_backends(self) -> dict[str, Callable[[str, Config], Storage]]:
        return self._merge("narad_storage_backends", "the storage URL scheme")

    def settings(self) -> dict[str, tuple[Setting, ...]]:
        """Plugin settings by the section each plugin claims."""
        return self._merge("narad_settings", "the settings section")

    # -- start-up ------------------------------------------------------------

    def check(self) -> None:
        """Ask every hook once, so that any malformed answer stops start-up.

        Raises:
            PluginError: naming the plugin and what is wrong.
        """
        by_uri, _ = self.drafts()
        self.format_checkers()
        self.compatibility_rules()
        self.schema_types()
        self.storage_backends()
        self.settings()
        defined = frozenset().union(*(draft.keywords for draft in by_uri.values()))
        blocked = sorted(name for name, p in self.pm.list_name_plugin() if p is None)
        for plugin, rules in self._call("narad_compatibility_rules"):
            for keyword, rule in rules.items():
                if keyword in defined or getattr(rule, "narad_extension", False):
                    continue
                problem = (
                    f"plugin {plugin!r} has a compatibility rule for {keyword!r}, "
                    "a keyword no installed draft defines: the rule would never run"
                )
                if blocked:
                    # Likely the keyword of a draft whose plugin is disabled.
                    log.warning("%s (disabled plugins: %s)", problem, blocked)
                    continue
                raise PluginError(
                    f"{problem}; mark it with narad.compatibility.extension if it "
                    "is the plugin's own keyword"
                )

    def configure(self, config: Config) -> Config:
        """``config`` with the plugins' settings resolved and checked."""
        return config.with_plugin_settings(self.settings())

    def describe(self) -> list[PluginInfo]:
        """Every registered plugin, its distribution, and what it claims."""
        claims: dict[tuple[str, str], list[str]] = {}
        for plugin, drafts in self._call("narad_json_schema_drafts"):
            claims[plugin, "drafts"] = [draft.name for draft in drafts]
        for plugin, types in self._call("narad_schema_types"):
            claims[plugin, "types"] = [t.name for t in types]
        for hook, kind in (
            ("narad_format_checkers", "formats"),
            ("narad_compatibility_rules", "keywords"),
            ("narad_storage_backends", "schemes"),
        ):
            for plugin, answer in self._call(hook):
                claims[plugin, kind] = list(answer)
        for plugin, sections in self._call("narad_settings"):
            claims[plugin, "settings"] = [
                f"plugins.{section}.{setting.name}"
                for section, settings in sections.items()
                for setting in settings
            ]
        infos = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:  # blocked
                continue
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
            infos.append(
                PluginInfo(
                    name,
                    *_distribution(name, plugin),
                    hooks=tuple(hooks),
                    **{
                        kind: tuple(claims.get((name, kind), ()))
                        for kind in (
                            "drafts",
                            "formats",
                            "keywords",
                            "schemes",
                            "settings",
                            "types",
                        )
                    },
                )
            )
        return infos

    # -- calling hooks -------------------------------------------------------

    def _merge(self, hook: str, what: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        owners: dict[str, str] = {}
        for plugin, mapping in self._call(hook):
            for key, value in mapping.items():
                _claim(owners, key, plugin, what)
                merged[key] = value
        return merged

    def _call(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Each plugin's checked answer to ``hook``, in registration order."""
        if hook in self._answers:
            return self._answers[hook]
        impls = getattr(self.pm.hook, hook).get_hookimpls()
        answers = []
        for impl in reversed(impls):
            others = [other.plugin for other in impls if other is not impl]
            caller = self.pm.subset_hook_caller(hook, remove_plugins=others)
            try:
                [answer] = caller(**kwargs) or [None]
            except Exception as exc:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} failed in {hook}: {exc!r}"
                ) from exc
            if answer is not None:
                answers.append(
                    (impl.plugin_name, _CHECKS[hook](impl.plugin_name, answer))
                )
        self._answers[hook] = answers
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
    # A generator, so the engine can stop at a rule's first violation.
    @functools.wraps(rule)
    def contained(old: Any, new: Any, ctx: Any) -> Iterator[Any]:
        try:
            yield from rule(old, new, ctx)
        except NaradError:
            raise  # a nested rule's refusal, already contained
        except Exception as exc:
            log.exception("compatibility rule for %r raised", keyword)
            raise CompatibilityRuleFailed(keyword, type(exc).__name__) from None

    return contained


def _claim(owners: dict[str, str], key: str, plugin: str, what: str) -> None:
    if key in owners and owners[key] != plugin:
        raise PluginConflict(
            f"plugins {owners[key]!r} and {plugin!r} both claim {what} {key!r}"
        )
    owners[key] = plugin


# -- checking answers ----------------------------------------------------------


def _mapping(plugin: str, hook: str, answer: Any) -> Mapping[str, Any]:
    if not isinstance(answer, Mapping) or not all(isinstance(k, str) for k in answer):
        raise PluginError(
            f"plugin {plugin!r}: {hook} must return a mapping keyed by strings, "
            f"got {reprlib.repr(answer)}"
        )
    return answer


def _callables(hook: str, what: str) -> Callable[[str, Any], Mapping[str, Any]]:
    def check(plugin: str, answer: Any) -> Mapping[str, Any]:
        for key, value in _mapping(plugin, hook, answer).items():
            if not callable(value):
                raise PluginError(
                    f"plugin {plugin!r}: the {what} for {key!r} is not callable "
                    f"({reprlib.repr(value)})"
                )
        return answer

    return check


def _drafts(plugin: str, answer: Any) -> Sequence[Draft]:
    if not isinstance(answer, (list, tuple)):
        raise PluginError(
            f"plugin {plugin!r}: narad_json_schema_drafts must return a list of "
            f"Draft records, got {reprlib.repr(answer)}"
        )
    for draft in answer:
        problem = _draft_problem(draft)
        if problem:
            raise PluginError(f"plugin {plugin!r}: malformed draft record: {problem}")
    return answer


def _draft_problem(draft: Any) -> str:
    if not isinstance(draft, Draft):
        return f"{reprlib.repr(draft)} is not a narad.drafts.Draft"
    if not isinstance(draft.name, str) or not draft.name:
        return f"name {draft.name!r} is not a non-empty string"
    if (
        not isinstance(draft.uris, (tuple, list, frozenset))
        or not draft.uris
        or not all(isinstance(uri, str) and uri for uri in draft.uris)
    ):
        return f"draft {draft.name!r}: uris must be a non-empty tuple of strings"
    if not isinstance(draft.keywords, (frozenset, set)) or not all(
        isinstance(k, str) for k in draft.keywords
    ):
        return f"draft {draft.name!r}: keywords must be a set of strings"
    if not isinstance(draft.meta_schema, Mapping):
        return f"draft {draft.name!r}: meta_schema must be a JSON object"
    return ""


def _schema_types(plugin: str, answer: Any) -> Sequence[SchemaType]:
    from narad.schematypes import ENCODINGS

    if not isinstance(answer, (list, tuple)):
        raise PluginError(
            f"plugin {plugin!r}: narad_schema_types must return a list of schema "
            f"types, got {reprlib.repr(answer)}"
        )
    for schema_type in answer:
        name = getattr(schema_type, "name", None)
        encodings = getattr(schema_type, "encodings", None)
        if not isinstance(name, str) or not _TYPE_NAME.fullmatch(name):
            problem = f"name {name!r} is not uppercase letters, digits and '_'"
        elif (
            not isinstance(encodings, tuple)
            or not encodings
            or not set(encodings) <= set(ENCODINGS)
        ):
            problem = f"{name}: encodings must be a non-empty tuple of {ENCODINGS}"
        elif not all(
            callable(getattr(schema_type, method, None))
            for method in ("bind", "parse", "load", "no_change", "compile", "check")
        ):
            problem = f"{name}: bind, parse, load, no_change, compile and check"
            problem += " must be methods"
        else:
            continue
        raise PluginError(f"plugin {plugin!r}: malformed schema type: {problem}")
    return answer


_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,31}")


def _settings(plugin: str, answer: Any) -> Mapping[str, tuple[Setting, ...]]:
    checked = {}
    for section, settings in _mapping(plugin, "narad_settings", answer).items():
        if not valid_section(section):
            raise PluginError(
                f"plugin {plugin!r}: settings section {section!r} must be lowercase "
                "letters, digits and '_', and not a core setting of [plugins]"
            )
        if not isinstance(settings, (list, tuple)):
            raise PluginError(
                f"plugin {plugin!r}: the settings of [plugins.{section}] must be a "
                "list of narad.config.Setting"
            )
        seen: set[str] = set()
        for setting in settings:
            _check_setting(plugin, section, setting, seen)
        checked[section] = tuple(settings)
    return checked


def _check_setting(plugin: str, section: str, setting: Any, seen: set[str]) -> None:
    where = f"plugin {plugin!r}: setting `plugins.{section}."
    if not isinstance(setting, Setting):
        raise PluginError(
            f"plugin {plugin!r}: {reprlib.repr(setting)} in [plugins.{section}] is "
            "not a narad.config.Setting"
        )
    if not valid_section(setting.name) or setting.name in seen:
        raise PluginError(f"{where}{setting.name}` is malformed or declared twice")
    seen.add(setting.name)
    try:
        setting.parse(setting.default)
    except (ValueError, TypeError) as exc:
        raise PluginError(
            f"{where}{setting.name}`: its default {setting.default!r} does not "
            f"parse: {exc}"
        ) from exc


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "narad_json_schema_drafts": _drafts,
    "narad_format_checkers": _callables("narad_format_checkers", "format checker"),
    "narad_compatibility_rules": _callables(
        "narad_compatibility_rules", "compatibility rule"
    ),
    "narad_schema_types": _schema_types,
    "narad_storage_backends": _callables("narad_storage_backends", "storage factory"),
    "narad_settings": _settings,
}


@functools.cache
def _top_level_distributions() -> Mapping[str, list[str]]:
    return packages_distributions()


def _distribution(name: str, plugin: object) -> tuple[str, str]:
    """The distribution that installed ``plugin`` and its version."""
    module = getattr(plugin, "__name__", type(plugin).__module__)
    for distribution in _top_level_distributions().get(module.split(".")[0], []):
        return distribution, distribution_version(distribution)
    if name in DEFAULT_PLUGINS:
        return "narad", __version__
    return "", ""


def connect_storage(config: Config, plugins: Plugins) -> Storage:
    """A client of ``storage.url``, made by the storage plugin that claims
    the URL's scheme (:meth:`Plugins.storage_backends`)."""
    url = config.storage_url
    if not url:
        raise InvalidConfiguration(
            "`storage.url` is empty: `narad serve` starts the embedded server and "
            "sets it; a bare gunicorn needs NARAD_STORAGE_URL"
        )
    scheme = urlsplit(url).scheme
    backends = plugins.storage_backends()
    if scheme not in backends:
        known = ", ".join(sorted(backends))
        raise InvalidConfiguration(
            f"`storage.url` scheme {scheme!r} has no storage plugin (known: {known})"
        )
    return backends[scheme](url, config)


def load_plugins(
    config: Config | None = None,
    *,
    load_entry_points: bool = True,
    extra: Mapping[str, object] | None = None,
) -> Plugins:
    """The checked :class:`Plugins` for a process, honouring ``plugins.disabled``.

    Raises:
        PluginError: a plugin cannot load or gives a malformed answer.
    """
    disabled = config.plugins_disabled if config is not None else ()
    plugins = Plugins(
        get_plugin_manager(
            disabled=disabled, load_entry_points=load_entry_points, extra=extra
        )
    )
    plugins.check()
    return plugins
