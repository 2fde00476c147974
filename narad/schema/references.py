"""Schema references: Confluent's ``references`` checked, stored and resolved.

A registration under ``/registry`` may name other registered versions its
schema uses (``[{"name", "subject", "version"}]``): an Avro schema the
named types another subject's version defines, a Protobuf file the files it
imports, a JSON Schema the documents its ``$ref`` URIs name. The histories
store a version's references beside its document (compact JSON, in the
order given: :func:`references_bytes`), and they are part of its identity
and its global id (:func:`narad.schema.service.fingerprint`).

:class:`ReferenceResolver` reads the versions a list of references names,
and theirs in turn, into :class:`narad.schematypes.Reference` trees, which
reach the schema type through ``SchemaOptions.references``. A referenced
version is a version of a standalone subject (soft-deleted ones too, as
Confluent resolves them) or of a topic's subject ``<t>-value`` (the topic's
history), of the same type as the schema referring to it.

Bounds, so no registration (and no load of a stored version) does unbounded
work: at most :data:`MAX_REFERENCES` references per version, references
nested at most :data:`MAX_REFERENCE_DEPTH` levels, at most
:data:`MAX_REFERENCED` distinct versions and :data:`MAX_REFERENCED_BYTES`
bytes of their documents in all; a version reached twice (a diamond) is read
and counted once, one reached from itself (a cycle, possible only through a
topic deleted and created again) is refused. Refusals are
:class:`~narad.errors.InvalidSchema` (Confluent's 42201 under
``/registry``); a missing version in Confluent's words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from narad import jsontext
from narad.broker.records import TopicRecords
from narad.errors import InvalidSchema
from narad.errors import TopicNotFound
from narad.quoting import quote
from narad.registry.subjects import MAX_VERSION
from narad.registry.subjects import SUBJECT
from narad.registry.subjects import topic_of
from narad.schematypes import Reference
from narad.storage import SchemaVersion
from narad.storage import Storage

__all__ = (
    "MAX_REFERENCED",
    "MAX_REFERENCED_BYTES",
    "MAX_REFERENCES",
    "MAX_REFERENCE_DEPTH",
    "MAX_REFERENCE_NAME",
    "ReferenceResolver",
    "reference_items",
    "references_bytes",
)

#: References one version may list.
MAX_REFERENCES = 64
#: Levels of references of references (the version's own are level 1).
MAX_REFERENCE_DEPTH = 16
#: Distinct versions all the levels may name together.
MAX_REFERENCED = 256
#: Bytes of those versions' documents together (each is at most 256 KiB).
MAX_REFERENCED_BYTES = 1024 * 1024
#: Characters of a reference's name (a type's full name, an import path, a
#: URI).
MAX_REFERENCE_NAME = 1024


def references_bytes(value: object) -> bytes:
    """A request's ``references`` as the histories store them: compact JSON
    of ``{"name", "subject", "version"}`` objects in the order given (other
    members dropped), or empty for none (absent, null or ``[]``).

    Raises:
        InvalidSchema: not a list of such objects, more than
            :data:`MAX_REFERENCES`, or two of one name.
    """
    if value is None or value == []:
        return b""
    if not isinstance(value, list):
        raise InvalidSchema("references must be an array of references")
    if len(value) > MAX_REFERENCES:
        raise InvalidSchema(
            f"references: {len(value)} references, more than the "
            f"{MAX_REFERENCES} one schema may have"
        )
    items = []
    names: set[str] = set()
    for i, item in enumerate(value):
        name, subject, version = _item(item, i)
        if name in names:
            raise InvalidSchema(
                f"references/{i}: the name {quote(name)} is given twice"
            )
        names.add(name)
        items.append({"name": name, "subject": subject, "version": version})
    return json.dumps(items, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def _item(item: object, i: int) -> tuple[str, str, int]:
    where = f"references/{i}"
    if not isinstance(item, dict):
        raise InvalidSchema(
            f"{where}: a reference is an object with name, subject and version"
        )
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSchema(f"{where}: name must be a non-empty string")
    if len(name) > MAX_REFERENCE_NAME:
        raise InvalidSchema(
            f"{where}: name is longer than {MAX_REFERENCE_NAME} characters"
        )
    subject = item.get("subject")
    if not isinstance(subject, str) or SUBJECT.fullmatch(subject) is None:
        raise InvalidSchema(
            f"{where}: subject must be a subject's name (1 to 255 printable "
            "ASCII characters but '/')"
        )
    version = item.get("version")
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or not 1 <= version <= MAX_VERSION
    ):
        raise InvalidSchema(f"{where}: version must be a version number from 1")
    return name, subject, version


def reference_items(raw: bytes) -> list[tuple[str, str, int]]:
    """The ``(name, subject, version)`` of stored references (compact JSON,
    as :func:`references_bytes` writes it); empty for none."""
    if not raw:
        return []
    value: Any = jsontext.loads(raw, max_depth=3)
    return [(r["name"], r["subject"], int(r["version"])) for r in value]


@dataclass
class _Walk:
    """One resolution's state: what it read, and what that cost."""

    read: dict[tuple[str, int], tuple[str, bytes, tuple[Reference, ...]]] = field(
        default_factory=dict
    )
    count: int = 0
    size: int = 0


class ReferenceResolver:
    """Reads the versions references name, within the module's bounds."""

    def __init__(self, storage: Storage, records: TopicRecords) -> None:
        self.storage = storage
        self.records = records

    def resolve(self, raw: bytes, schema_type: str) -> tuple[Reference, ...]:
        """The references ``raw`` (stored form) of a schema of type
        ``schema_type``, resolved; ``()`` for none.

        Raises:
            InvalidSchema: a version missing or of another type, a cycle, or
                a bound passed; the message says which.
        """
        if not raw:
            return ()
        return self._level(raw, schema_type, _Walk(), (), 1)

    def _level(
        self,
        raw: bytes,
        schema_type: str,
        walk: _Walk,
        path: tuple[tuple[str, int], ...],
        depth: int,
    ) -> tuple[Reference, ...]:
        if depth > MAX_REFERENCE_DEPTH:
            chain = " -> ".join(f"{s} version {v}" for s, v in path)
            raise InvalidSchema(
                f"references nest deeper than {MAX_REFERENCE_DEPTH} levels: {chain}"
            )
        items = reference_items(raw)
        if len(items) > MAX_REFERENCES:
            raise InvalidSchema(
                f"references: a version lists {len(items)} references, more "
                f"than {MAX_REFERENCES}"
            )
        out = []
        for name, subject, version in items:
            key = (subject, version)
            if key in path:
                chain = " -> ".join(f"{s} version {v}" for s, v in (*path, key))
                raise InvalidSchema(f"references form a cycle: {chain}")
            found = walk.read.get(key)
            if found is None:
                kind, stored = self._read(subject, version)
                if kind != schema_type:
                    raise InvalidSchema(
                        f"reference {quote(name)} names version {version} of "
                        f"subject {quote(subject)}, a {kind} schema: a "
                        f"{schema_type} schema can only reference {schema_type} "
                        "schemas"
                    )
                walk.count += 1
                walk.size += len(stored.document)
                if walk.count > MAX_REFERENCED:
                    raise InvalidSchema(
                        f"references name more than {MAX_REFERENCED} versions "
                        "in all (references of references included)"
                    )
                if walk.size > MAX_REFERENCED_BYTES:
                    raise InvalidSchema(
                        "the referenced schemas are larger than "
                        f"{MAX_REFERENCED_BYTES // 1024} KiB in all (references "
                        "of references included)"
                    )
                nested = self._level(
                    stored.references, schema_type, walk, (*path, key), depth + 1
                )
                found = (kind, stored.document, nested)
                walk.read[key] = found
            kind, document, nested = found
            out.append(Reference(name, subject, version, kind, document, nested))
        return tuple(out)

    def _read(self, subject: str, version: int) -> tuple[str, SchemaVersion]:
        """The type and the stored version ``version`` of ``subject``.

        Raises:
            InvalidSchema: no such version (Confluent's words).
        """
        topic = topic_of(subject)
        if topic:
            try:
                meta = self.records.cached(topic)
            except TopicNotFound:
                meta = None
            if meta is not None:
                stored = self.storage.get_schema(topic, version)
                if stored is None:
                    raise _missing(subject, version)
                return meta.schema_type, stored
        found = self.storage.get_subject(subject)
        for stored in found.versions if found is not None else ():
            if stored.version == version:
                if stored.identity is not None:
                    return stored.identity.schema_type, stored
                by_id = self.storage.schema_by_id(stored.schema_id)
                if by_id is None:
                    break
                return by_id.schema_type, stored
        raise _missing(subject, version)


def _missing(subject: str, version: int) -> InvalidSchema:
    return InvalidSchema(
        f'No schema reference found for subject "{subject}" and version {version}'
    )
