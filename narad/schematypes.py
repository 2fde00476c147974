"""Schema types: what a plugin provides so that topics can carry its schemas.

Public, like :mod:`narad.storage` and :mod:`narad.compatibility`, and covered
by the compatibility promise (docs/plugins.md). A plugin answers the hook
``narad_schema_types`` (:mod:`narad.hookspecs`) with :class:`SchemaType`
objects; the built-in ``JSON`` type (JSON Schema, ``plugins/narad_jsonschema``)
is one, and so are ``AVRO`` (``plugins/narad_avro``) and ``PROTOBUF``
(``plugins/narad_protobuf``).

A topic names its type (``schema_type``), its payload ``encoding`` (one of the
type's :attr:`SchemaType.encodings`, the first the default) and its type's
options (:class:`SchemaOptions`: ``proto_message``). The schema service
(:mod:`narad.schema.service`) owns everything else, whatever the type: the
history rules (append-only, 1000 versions, byte budgets, idempotency, modes,
the conditional base version, children's adoption) and the capacity bounds of
costly work. A type only answers four questions:

- :meth:`SchemaType.parse`: is this schema document (the JSON text of a
  request's ``schema`` member) registrable, and as what
  (:class:`ParsedSchema`: the compact bytes to store, an identity for "the
  same schema", whether validating against it is costly)?
  :meth:`SchemaType.load` reads a stored version back, cheaply.
- :meth:`SchemaType.no_change`: does a proposed schema register nothing over
  the current version (by default: equal identities)?
- :meth:`SchemaType.compile`: the payload check of one stored version for the
  topic's encoding, built once per version and cached by the service.
- :meth:`SchemaType.check`: what a compatibility mode finds against stored
  versions, in one :class:`Report` of :class:`Finding` records, each a
  :class:`Violation` (``pointer``, ``keyword``: the rule, ``message``) with the
  version it breaks (``against_version`` in the API) and the direction.

Three more have defaults, for Confluent's registry API and wire format
(``/registry``, topics with ``framing: confluent``):

- :meth:`SchemaType.registry_schema` and :meth:`SchemaType.registry_document`:
  a stored version as Confluent's ``schema`` string, and back to what
  :meth:`SchemaType.parse` takes.
- :meth:`SchemaType.compile_framed`: the check of what follows a framed
  message's magic byte and schema id, in :attr:`SchemaType.framed_encoding`
  (what Confluent's serializers write).

Schema references (Confluent's ``references``, registered under
``/registry`` only): a type that sets :attr:`SchemaType.takes_references`
finds the referenced versions, resolved, in ``options.references``
(:class:`Reference`) in every call that reads a schema with references:
:meth:`~SchemaType.parse`, :meth:`~SchemaType.load`,
:meth:`~SchemaType.compile`, :meth:`~SchemaType.compile_framed` and
:meth:`~SchemaType.check` (the stored versions checked against carry their
own, in their :attr:`ParsedSchema.value`). The references are part of the
schema's identity whatever the type does (a global id stands for a document
and its references); a schema without references sees an empty tuple and
takes the same path as before references existed. The registry refuses
references for a type that does not take them.

Refusals are Narad's errors: :class:`~narad.errors.InvalidSchema` for a
schema, :class:`~narad.errors.InvalidPayload` for a payload (both 400), and
:class:`UnusableVersion` for a stored version this node cannot use (409 on
produce, cached per version).

The rulebook's nesting bounds hold for every type's documents and payloads:
:data:`SCHEMA_DEPTH` (a schema document nests at most 64 levels) and
:data:`PAYLOAD_DEPTH` (a payload at most 256).
"""

from __future__ import annotations

from abc import ABC
from abc import abstractmethod
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import replace
from typing import TYPE_CHECKING
from typing import Any

from narad.compatibility import Violation
from narad.schema.limits import PAYLOAD_DEPTH
from narad.schema.limits import SCHEMA_DEPTH
from narad.schema.modes import MAX_REPORT_BYTES
from narad.schema.modes import MAX_REPORTED
from narad.schema.modes import Direction
from narad.schema.modes import Finding
from narad.schema.modes import Mode
from narad.schema.modes import Report

if TYPE_CHECKING:
    from narad.plugins import Plugins

__all__ = (
    "DEFAULT_TYPE",
    "ENCODINGS",
    "PAYLOAD_DEPTH",
    "SCHEMA_DEPTH",
    "Compiled",
    "Direction",
    "Finding",
    "Mode",
    "ParsedSchema",
    "Reference",
    "Report",
    "SchemaOptions",
    "SchemaType",
    "UnusableVersion",
    "Violation",
    "check_versions",
    "collect",
    "walk_references",
)

#: The type of a topic that names none (every topic stored before types).
DEFAULT_TYPE = "JSON"
#: Every payload encoding a type may take.
ENCODINGS = ("json", "binary")


@dataclass(frozen=True, eq=False)
class Reference:
    """A schema reference (Confluent's ``{"name", "subject", "version"}``)
    resolved to the version it names, with that version's own references
    resolved the same way.

    What ``name`` means is the type's: the full name of a named type the
    referenced schema defines (``AVRO``), the import path of the referenced
    file (``PROTOBUF``), the URI a ``$ref`` names (``JSON``). The service
    resolves references within bounds (:mod:`narad.schema.references`): a
    type walks them without limits of its own. One referenced version
    reached along two paths is one object.

    Attributes:
        name: The reference's name.
        subject: The subject holding the referenced version.
        version: The version's number in the subject.
        schema_type: The referenced version's type.
        document: The referenced version's stored document.
        references: Its own references, resolved.
    """

    name: str
    subject: str
    version: int
    schema_type: str
    document: bytes
    references: tuple[Reference, ...] = ()


def walk_references(references: tuple[Reference, ...]) -> list[Reference]:
    """Every referenced version once (by subject and version: the first
    reference naming it), each after those it references (dependencies
    first, in the order given)."""
    out: list[Reference] = []
    seen: set[tuple[str, int]] = set()
    # Iterative post-order: the service bounds the depth, but a type need
    # not trust that to stay off the C stack.
    stack: list[tuple[Reference, bool]] = [(r, False) for r in reversed(references)]
    while stack:
        reference, done = stack.pop()
        key = (reference.subject, reference.version)
        if key in seen:
            continue
        if done:
            seen.add(key)
            out.append(reference)
            continue
        stack.append((reference, True))
        stack.extend((r, False) for r in reversed(reference.references))
    return out


@dataclass(frozen=True)
class SchemaOptions:
    """A topic's settings that a type reads besides the schema.

    Attributes:
        encoding: The topic's payload encoding (one of the type's
            :attr:`SchemaType.encodings`).
        proto_message: The topic's message (``PROTOBUF``): the full name the
            topic asks for, or ``""`` to let the schema decide.
        proto_message_kept: ``proto_message`` is the topic's current message,
            kept by a PATCH that names none (a schema naming its own message
            may then name another), not one the request gave.
        references: The schema's references (Confluent's registry), resolved;
            empty for a schema without any (every ``/v1`` one).
        payloads: The history validates payloads (a topic's). False for a
            registry's standalone subject, whose versions only clients read
            and other schemas reference: a type may take there what no
            payload could be checked against (a Protobuf file declaring
            enums but no message, which other files import).
    """

    encoding: str
    proto_message: str = ""
    proto_message_kept: bool = False
    references: tuple[Reference, ...] = ()
    payloads: bool = True


@dataclass(frozen=True, eq=False)
class ParsedSchema:
    """A registrable schema, or a stored version read back.

    Attributes:
        stored: The JSON text the history stores (compact); a stored version
            read back has its stored bytes here.
        identity: What "the same schema" compares (see
            :meth:`SchemaType.no_change`).
        high_cost: Validating against it always takes the node's validation
            capacity bound.
        value: The type's own parsed form.
        message_name: The resolved message a ``PROTOBUF`` schema validates
            against (the topic record shows it); ``""`` for other types.
    """

    stored: bytes
    identity: bytes
    high_cost: bool
    value: Any
    message_name: str = ""


@dataclass(frozen=True)
class Compiled:
    """One stored version's payload check, compiled once.

    Attributes:
        validate: Accepts a payload or raises
            :class:`~narad.errors.InvalidPayload` (any ``InvalidArgument``),
            :class:`~narad.errors.CapacityBusy`, or :class:`UnusableVersion`.
        estimated_bytes: What keeping it costs, for the validator cache.
    """

    validate: Callable[[bytes], None]
    estimated_bytes: int


class UnusableVersion(Exception):
    """A stored version this node cannot use (a plugin missing, a rule of
    today the version breaks where the validator needs it).

    Attributes:
        reason: Why, and what puts it right.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SchemaType(ABC):
    """A schema type: subclass it (or provide the same attributes and methods).

    Attributes:
        name: The type's name as the API spells it (``"AVRO"``): uppercase
            letters, digits and ``_``.
        encodings: The payload encodings a topic of this type may take, from
            :data:`ENCODINGS`; the first is the default.
        offload_parse: :meth:`parse` runs on the worker's pool of native
            threads (:mod:`narad.serve.offload`), as CPU-bound work should. False
            for a parse that mostly waits on a subprocess (the Protobuf
            type's protoc): gevent runs subprocesses only on the event
            loop's thread, where the wait costs no other request anything.
        takes_references: The type resolves schema references from
            ``options.references`` (module docstring); False: the registry
            refuses a registration of it with references.
    """

    name: str = ""
    encodings: tuple[str, ...] = ()
    offload_parse: bool = True
    takes_references: bool = False

    @property
    def default_encoding(self) -> str:
        return self.encodings[0]

    @property
    def framed_encoding(self) -> str:
        """The encoding of a framed message's payload (Confluent's wire
        format): the type's ``binary`` one where it has one (Avro datums,
        Protobuf messages), else its default (JSON Schema: a JSON text)."""
        return "binary" if "binary" in self.encodings else self.default_encoding

    def bind(self, plugins: Plugins) -> SchemaType:
        """The type ready for a node whose plugins are ``plugins`` (the JSON
        type reads the drafts, format checkers and rules there); called once
        per process. The default is the type itself."""
        return self

    @abstractmethod
    def parse(self, raw: bytes, options: SchemaOptions) -> ParsedSchema:
        """Check a proposed schema: ``raw`` is the JSON text of the request's
        ``schema`` member.

        Raises:
            InvalidSchema: naming the rule broken and where.
        """

    def load(self, stored: bytes, options: SchemaOptions) -> ParsedSchema:
        """Read a stored version back (it passed :meth:`parse` when stored).

        Raises:
            UnusableVersion: this node cannot use it.
        """
        return self.parse(stored, options)

    def no_change(self, new: ParsedSchema, latest: ParsedSchema) -> bool:
        """Whether ``new`` registers nothing over the current version
        ``latest`` (a PATCH answers 200 with the current version)."""
        return new.identity == latest.identity

    @abstractmethod
    def compile(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        """The payload check of a stored version in ``options.encoding``;
        ``uri`` names the version (``narad://schema/<topic>/<version>``).

        Raises:
            UnusableVersion: this node cannot use the version.
        """

    def compile_framed(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        """The check of a framed message of a stored version: what follows
        the magic byte and the schema id (:mod:`narad.schema.framing`), in
        :attr:`framed_encoding` whatever ``options.encoding`` says. The
        default is :meth:`compile` in that encoding; the Protobuf type reads
        Confluent's message indexes first.

        Raises:
            UnusableVersion: this node cannot use the version.
        """
        framed = replace(options, encoding=self.framed_encoding)
        return self.compile(schema, framed, uri)

    def registry_schema(self, stored: bytes, fmt: str = "") -> str:
        """The ``schema`` string Confluent's registry API shows for a stored
        version's document ``stored``; ``fmt`` is the request's ``format``
        (``"serialized"``: the Protobuf type's base64 of the main file's
        ``FileDescriptorProto``; other types ignore it). The default is the
        stored JSON text itself, as Confluent's ``schema`` member of a JSON
        Schema or Avro schema is the document's text.

        Raises:
            UnusableVersion: this node cannot read the version.
        """
        return stored.decode("utf-8")

    def registry_document(self, schema: str) -> bytes:
        """What :meth:`parse` takes for a Confluent ``schema`` string (the
        inverse of :meth:`registry_schema`). The default is the string's
        UTF-8 bytes: a JSON Schema's or an Avro schema's ``schema`` member is
        the JSON document itself; a type whose document is a JSON string
        (Protobuf) gives the string's JSON literal instead."""
        return schema.encode("utf-8", "surrogatepass")

    @abstractmethod
    def check(
        self,
        new: ParsedSchema,
        against: Iterable[tuple[int, ParsedSchema]],
        mode: Mode,
        options: SchemaOptions,
        *,
        first: bool,
    ) -> Report:
        """What ``mode`` finds checking ``new`` against stored versions.

        Args:
            new: The proposed schema (or the current version, when the
                proposed one registers nothing).
            against: ``(version, schema)`` latest first, only those ``mode``
                names (the latest alone unless it is transitive); an iterator
                loads each one when its turn comes.
            mode: The compatibility mode.
            options: The topic's settings.
            first: Stop at the first violation (a PATCH); else report every
                one, within :func:`collect`'s bounds (a dry run).
        """


def check_versions(
    against: Iterable[tuple[int, ParsedSchema]],
    mode: Mode,
    findings: Callable[[ParsedSchema, int], Iterable[Finding]],
    *,
    first: bool,
) -> Report:
    """:meth:`SchemaType.check` for a type that compares two schemas at a
    time: ``findings(stored, version)`` against each version ``against``
    gives, in order, :func:`collect`-ed; nothing in a mode with no direction
    (``NONE``)."""
    if not mode.directions:
        return Report()
    per_version = ((v, findings(stored, v)) for v, stored in against)
    return collect(per_version, first=first)


def collect(
    per_version: Iterable[tuple[int, Iterable[Finding]]], *, first: bool
) -> Report:
    """A :class:`Report` of the findings against each version, in order
    (latest first; each version's iterable is read only when its turn comes),
    cut as the JSON type's are: after the first with ``first``, else at
    :data:`~narad.schema.modes.MAX_REPORTED` findings or
    :data:`~narad.schema.modes.MAX_REPORT_BYTES` of pointers and messages,
    and no further version is checked."""
    kept: list[Finding] = []
    checked: list[int] = []
    size = 0
    for version, findings in per_version:
        checked.append(version)
        for finding in findings:
            size += len(finding.violation.pointer) + len(finding.violation.message)
            if kept and (len(kept) >= MAX_REPORTED or size > MAX_REPORT_BYTES):
                return Report(tuple(kept), tuple(checked), truncated=True)
            kept.append(finding)
            if first:
                return Report(tuple(kept), tuple(checked))
    return Report(tuple(kept), tuple(checked))
