"""Every hook Narad calls, in one place.

Plugins implement these with the :data:`hookimpl` marker re-exported by
:mod:`narad`. Each hook is a *collection* hook: every plugin returns what it
contributes, keyed by the thing it claims (a dialect URI, a format name, a
keyword, a URL scheme). The host (:mod:`narad.plugins`) merges the answers and
refuses two plugins claiming the same key, naming both, so a hook never returns
a winner silently.

Hooks are called through pluggy with keyword arguments only, one plugin at a
time so that every answer is credited to its plugin (``narad plugins`` lists
the claims; ``NARAD_TRACE_PLUGINS=1`` logs every call). Adding an argument to
a spec later is safe for existing plugins; removing one is not. What a hook
returns is checked when the node starts: a malformed answer stops start-up
with a :class:`~narad.errors.PluginError` naming the plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

import pluggy

if TYPE_CHECKING:
    from narad.config import Config
    from narad.config import Setting
    from narad.drafts import Draft
    from narad.schematypes import SchemaType
    from narad.storage import Storage

NAME = "narad"

hookspec = pluggy.HookspecMarker(NAME)
hookimpl = pluggy.HookimplMarker(NAME)


# -- JSON Schema drafts ------------------------------------------------------


@hookspec
def narad_json_schema_drafts() -> list[Draft]:
    """Return the JSON Schema drafts this plugin provides.

    Each :class:`~narad.drafts.Draft` names the ``$schema`` URIs that
    select it, carries its meta-schema and the set of keywords it defines.
    Keywords a draft does not define are annotations to the validator and to
    the compatibility checker. A ``$schema`` no plugin claims is refused.

    Key claimed: every URI in ``Draft.uris``; the default draft is the one
    with ``default=True`` (exactly one plugin may claim it). An answer that
    is not a list of ``Draft`` records with URIs and a keyword set stops
    start-up.
    """


# -- Format checkers ---------------------------------------------------------


@hookspec
def narad_format_checkers() -> Mapping[str, Callable[[str], bool]]:
    """Return format checkers keyed by ``format`` name.

    A checker takes a string instance and answers whether it is a valid value
    of the format. It is called only for strings (other types pass ``format``)
    and must run in time linear in the string's length: payloads reach it.
    A format no plugin claims is ignored by validation, as the rulebook says.

    Key claimed: each format name. A checker that is not callable stops
    start-up.
    """


# -- Compatibility keyword rules ---------------------------------------------


@hookspec
def narad_compatibility_rules() -> Mapping[str, Callable[..., Any]]:
    """Return compatibility rules keyed by the JSON Schema keyword they judge.

    The compatibility engine walks the previous and the proposed schema and,
    at every subschema pair, calls the rule registered for each keyword
    present on either side as ``rule(old, new, ctx)``: the keyword's two
    values (``ABSENT`` where a side lacks it) and a
    :class:`~narad.compatibility.RuleContext` (pointer, both subschemas, both
    drafts, ``compare`` to recurse, ``identical``, ``unchanged``,
    ``resolve``). A rule yields a :class:`~narad.compatibility.Violation`
    (kind, message) for each way the change can refuse a message the previous
    version accepted, and never raises for an incompatible change; the engine
    fills in keyword and pointer. Everything a rule needs is in the public
    module :mod:`narad.compatibility`.

    A keyword with no rule may only stay identical or be removed. A keyword
    the schema's draft does not define is an annotation and its rule is not
    called, unless the rule is marked with
    :func:`~narad.compatibility.extension` (a plugin's own vocabulary, such as
    ``x-unit``). Rules of keywords that constrain no value (dialect,
    identifiers, definitions, annotations) are marked with
    :func:`~narad.compatibility.document_keyword`;
    :func:`~narad.compatibility.changes_freely` is the rule of a keyword that
    can change freely.

    Key claimed: each keyword. A rule that is not callable, or a rule for a
    keyword no installed draft defines that is not marked as an extension
    (it would never run), stops start-up naming the plugin and the keyword;
    while some plugin is disabled it is logged as a warning instead (the
    keyword is likely the disabled draft's).
    """


# -- Schema types --------------------------------------------------------------


@hookspec
def narad_schema_types() -> list[SchemaType]:
    """Return the schema types this plugin provides.

    Each :class:`~narad.schematypes.SchemaType` is what a topic's
    ``schema_type`` names (``"JSON"``, ``"AVRO"``, ``"PROTOBUF"``): its payload
    ``encodings`` (the first the default), how a schema document is parsed and
    normalised (the bytes a history stores, the identity that makes a
    registration idempotent, whether it is costly to validate against), the
    payload check of a stored version, and the compatibility check of a
    proposed schema against stored versions in a mode, whose violations have
    one shape whatever the type (``pointer``, ``keyword``, ``message``, the
    version broken). Everything a type needs is in the public module
    :mod:`narad.schematypes`; the history rules (append-only, budgets,
    modes, idempotency, children's adoption) are the schema service's and
    hold for every type. JSON Schema is the built-in ``JSON`` type, provided
    through this hook like any other.

    Key claimed: each type's ``name``. An answer that is not a list of
    schema types with a name (uppercase letters, digits, ``_``) and
    encodings from :data:`narad.schematypes.ENCODINGS` stops start-up, and so
    do two plugins claiming one name (:class:`~narad.errors.PluginConflict`).
    """


# -- Storage backends --------------------------------------------------------


@hookspec
def narad_storage_backends() -> Mapping[str, Callable[[str, Config], Storage]]:
    """Return storage factories keyed by the URL scheme they serve.

    A factory takes the ``storage.url`` setting and the whole
    :class:`~narad.config.Config` and returns a connected
    :class:`~narad.storage.Storage`. It should not talk to the server yet:
    factories run in every worker process at start-up.

    The object must meet the contract documented in :mod:`narad.storage`
    (:mod:`narad.testing.storage_contract` checks it).

    Key claimed: each URL scheme (``redis``, ``unix``, ...).
    """


# -- Settings ----------------------------------------------------------------


@hookspec
def narad_settings() -> Mapping[str, Sequence[Setting]]:
    """Return the settings this plugin reads, keyed by their section name.

    A section ``"redis"`` is the TOML table ``[plugins.redis]``; each
    :class:`~narad.config.Setting` (name, default, parser, one-line doc) is
    overridden by ``NARAD_PLUGINS_<SECTION>_<NAME>``. ``narad config`` shows
    them, and a value its parser refuses stops start-up naming the setting
    (``plugins.redis.retry_attempts``). Read them from the resolved
    :class:`~narad.config.Config` with ``config.plugin("redis")``.

    Key claimed: each section name (lowercase letters, digits and ``_``).
    """
