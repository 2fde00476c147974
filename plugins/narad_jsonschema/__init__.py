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
- schema references (Confluent's, through ``/registry``): each names a URI
  the schema's ``$ref`` values use; the referenced documents are bundled
  into one compound document (:mod:`narad_jsonschema.bundling`), which is
  what registration checks, the validator compiles and compatibility
  compares, while the history stores the schema as given;
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
from narad_jsonschema.bundling import bundle
from narad_jsonschema.bundling import dump

if TYPE_CHECKING:
    from narad.plugins import Plugins

__all__ = ("TYPE", "JsonSchemaType")

#: The rulebook's bound on a schema document (its compact text).
MAX_SCHEMA_BYTES = 256 * 1024

# The remedy for a version registration would refuse now.
_STORED_BEFORE = (
    "; it was stored before registration refused that: register a new version "
    "of the schema"
)


class JsonSchemaType(SchemaType):
    """JSON Schema, bound to a node's drafts, format checkers and rules."""

    name = "JSON"
    encodings = ("json",)
    takes_references = True

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
        if options.references:
            return self._parse_referring(raw, options)
        registered = register(raw, drafts=self.drafts, default_draft=self._default())
        return ParsedSchema(
            registered.compact,
            registered.compact,
            registered.high_cost,
            (registered.document, registered.draft),
        )

    def _parse_referring(self, raw: bytes, options: SchemaOptions) -> ParsedSchema:
        """A schema with references: the bundle registered, the schema as
        given stored (its compact text, within the rulebook's size)."""
        try:
            document = jsontext.loads(raw, max_depth=SCHEMA_DEPTH)
        except jsontext.JSONTextError as exc:
            raise InvalidSchema(f"schema: {exc}") from None
        compact = jsontext.compact(raw)
        if len(compact) > MAX_SCHEMA_BYTES:
            raise InvalidSchema("schema: is larger than 256 KiB")
        draft = self._draft_given(document)
        bundled, embedded = bundle(document, options.references, draft, self.drafts)
        text = dump(bundled)
        if len(text) > MAX_SCHEMA_BYTES:
            raise InvalidSchema(
                "schema: with the documents its references name embedded, it "
                "is larger than 256 KiB"
            )
        registered = register(
            text,
            drafts=self.drafts,
            default_draft=self._default(),
            embedded=embedded,
        )
        return ParsedSchema(
            compact,
            compact,
            registered.high_cost,
            (registered.document, registered.draft),
        )

    def _draft_given(self, document: Any) -> Draft:
        """The draft a document names (the default when none); one no plugin
        provides is left to registration to refuse."""
        uri = document.get("$schema") if isinstance(document, dict) else None
        found = self.drafts.get(uri) if isinstance(uri, str) else None
        return found or self._default()

    def load(self, stored: bytes, options: SchemaOptions) -> ParsedSchema:
        document = _parse(stored)
        draft = self.draft_of(document)
        if options.references:
            try:
                document, _ = bundle(document, options.references, draft, self.drafts)
            except InvalidSchema as exc:
                raise UnusableVersion(exc.detail.removeprefix("schema: ")) from None
        return ParsedSchema(stored, stored, False, (document, draft))

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
