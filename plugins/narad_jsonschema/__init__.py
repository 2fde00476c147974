"""JSON Schema: the built-in ``JSON`` schema type.

The engine is Narad's own (registration, the compiled validator, the
structural compatibility check and its modes), public as
:mod:`narad.jsonschema`; this plugin only puts it behind the schema-type
hook, exactly as the Avro and Protobuf types are, so built-ins are not
privileged. Drafts, format checkers and
compatibility rules still come from their own hooks: :meth:`JsonSchemaType.
bind` reads them from the node's plugins.

What the type adds to the generic history rules:

- idempotency is the rulebook's: the same JSON value, or a change of
  annotations only (``title``, ``description``, ...), registers nothing;
- a stored version naming a draft no plugin of this node provides, or one
  stored before registration refused what breaks the validator, is unusable
  (:class:`~narad.schematypes.UnusableVersion`, 409 on produce).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

from narad import hookimpl
from narad import jsonschema
from narad import jsontext
from narad.errors import CapacityBusy
from narad.errors import InvalidArgument
from narad.errors import InvalidSchema
from narad.jsonschema import SCHEMA_DEPTH
from narad.jsonschema import Draft
from narad.jsonschema import Validator
from narad.jsonschema import check_stored
from narad.jsonschema import register
from narad.quoting import quote
from narad.schematypes import Compiled
from narad.schematypes import Mode
from narad.schematypes import ParsedSchema
from narad.schematypes import Report
from narad.schematypes import SchemaOptions
from narad.schematypes import SchemaType
from narad.schematypes import UnusableVersion
from narad.serve import offload

if TYPE_CHECKING:
    from narad.plugins import Plugins

__all__ = ("TYPE", "JsonSchemaType")

# The remedy for a version registration would refuse now.
_STORED_BEFORE = (
    "; it was stored before registration refused that: register a new version "
    "of the schema"
)


class JsonSchemaType(SchemaType):
    """JSON Schema, bound to a node's drafts, format checkers and rules."""

    name = "JSON"
    encodings = ("json",)

    def __init__(
        self,
        drafts: Mapping[str, Draft] | None = None,
        default_draft: Draft | None = None,
        formats: Mapping[str, Callable[[str], bool]] | None = None,
        rules: Mapping[str, Any] | None = None,
    ) -> None:
        self.drafts = drafts or {}
        self.default_draft = default_draft
        self.formats = formats or {}
        self.rules = rules or {}

    def bind(self, plugins: Plugins) -> JsonSchemaType:
        drafts, default = plugins.drafts()
        return JsonSchemaType(
            drafts, default, plugins.format_checkers(), plugins.compatibility_rules()
        )

    def _default(self) -> Draft:
        if self.default_draft is None:
            raise RuntimeError("the JSON schema type is used unbound")
        return self.default_draft

    # -- documents -------------------------------------------------------------

    def parse(self, raw: bytes, options: SchemaOptions) -> ParsedSchema:
        registered = register(raw, drafts=self.drafts, default_draft=self._default())
        return ParsedSchema(
            registered.compact,
            registered.compact,
            registered.high_cost,
            (registered.document, registered.draft),
        )

    def load(self, stored: bytes, options: SchemaOptions) -> ParsedSchema:
        document = _parse(stored)
        return ParsedSchema(stored, stored, False, (document, self.draft_of(document)))

    def draft_of(self, document: Any) -> Draft:
        """The draft of a stored version.

        Raises:
            UnusableVersion: its ``$schema`` names a draft no plugin of this
                node provides (one disabled, or not installed here).
        """
        uri = document.get("$schema") if isinstance(document, dict) else None
        if not isinstance(uri, str):
            return self._default()
        draft = self.drafts.get(uri)
        if draft is None:
            raise UnusableVersion(
                f"its $schema {quote(uri)} names a draft no plugin "
                "of this node provides: load that draft's plugin (see plugins."
                "disabled and `narad plugins`)"
            )
        return draft

    def no_change(self, new: ParsedSchema, latest: ParsedSchema) -> bool:
        # The same JSON value, or annotations alone changed (the rulebook).
        document, draft = latest.value
        return jsonschema.no_change(document, new.value[0], draft=draft)

    # -- payloads --------------------------------------------------------------

    def compile(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        document, draft = schema.value
        try:
            validator = Validator(
                document,
                draft=draft,
                drafts=self.drafts,
                formats=self.formats,
                schema_uri=uri,
            )
        except Exception as exc:
            raise UnusableVersion(_unusable(document, draft, exc)) from None

        def validate(payload: bytes) -> None:
            try:
                validator.validate(payload)
            except (InvalidArgument, CapacityBusy):
                raise
            except Exception as exc:
                # Only a version registration would refuse now gets here
                # (multipleOf 0 where a reference leads): it is unusable.
                raise UnusableVersion(_unusable(document, draft, exc)) from None

        return Compiled(validate, validator.estimated_bytes(len(schema.stored)))

    # -- compatibility ---------------------------------------------------------

    def check(
        self,
        new: ParsedSchema,
        against: Iterable[tuple[int, ParsedSchema]],
        mode: Mode,
        options: SchemaOptions,
        *,
        first: bool,
    ) -> Report:
        document, draft = new.value
        return jsonschema.check(
            document,
            draft,
            ((version, *stored.value) for version, stored in against),
            directions=mode.directions,
            rules=self.rules,
            first=first,
        )


def _unusable(document: Any, draft: Draft, exc: Exception) -> str:
    """Why a stored version cannot be used, now that compiling or validating
    it raised ``exc``.

    The validator relies on what registration checks, and a version stored
    before registration checked something (what a reference leads to,
    outside the meta-schema's reach) may break it; one that merely breaks a
    rule of today (minLength -1 there) keeps working until it does.

    Raises:
        Exception: ``exc`` again, when registration finds nothing wrong with
            the version: Narad's fault, not the version's.
    """
    if isinstance(exc, InvalidSchema):  # the compiler's own refusal
        return exc.detail.removeprefix("schema: ") + _STORED_BEFORE
    try:
        offload.run(check_stored, document, draft)
    except InvalidSchema as found:
        return found.detail.removeprefix("schema: ") + _STORED_BEFORE
    raise exc


def _parse(document: bytes) -> Any:
    # A version stored before repeated keys were refused may hold one.
    return jsontext.loads(document, max_depth=SCHEMA_DEPTH, allow_duplicate_keys=True)


#: The type, unbound (:meth:`JsonSchemaType.bind` makes it usable).
TYPE = JsonSchemaType()


@hookimpl
def narad_schema_types() -> list[SchemaType]:
    return [TYPE]
