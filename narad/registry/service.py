"""The registry service: Confluent Schema Registry's operations over Narad's
schema histories, a topic's and the standalone subjects'.

A subject ``<topic>-value`` of an existing topic is answered from the
topic's history, and written through the schema service as a PATCH of the
topic's schema is (:meth:`narad.schema.service.SchemaService.change`: the
topic's mode, budgets, version cap, its children's adoption); its config is
the topic's compatibility mode. Any other subject is standalone: checked by
the same engine (:meth:`SchemaService.parse`, :meth:`SchemaService.check`),
in its own mode (or the registry's default), against its versions that are
not soft-deleted, and appended by the storage only if no other version came
first (``expected_latest``; a refusal is checked again from there).

Every distinct schema has one global id (:func:`narad.schema.service.
fingerprint` says which are the same); registering a schema that is already
a live version of the subject registers nothing and answers its id, as
Confluent does. A topic's versions stored before global ids are given theirs
the first time the registry reads the topic (:meth:`RegistryService.
topic_versions`).

Authorisation is the resources' (:mod:`narad.http.registry`); the service
takes what they decided (the topic incarnation its user owns, ``epoch``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from narad.broker.records import TopicRecords
from narad.broker.topics import TopicService
from narad.errors import SchemaTypesDiffer
from narad.errors import TooManyVersions
from narad.errors import TopicKeptChanging
from narad.errors import TopicNotFound
from narad.registry.errors import IncompatibleWithEarlier
from narad.registry.errors import InvalidCompatibilityLevel
from narad.registry.errors import InvalidRegistrySchema
from narad.registry.errors import ReferenceExists
from narad.registry.errors import SchemaNotFound
from narad.registry.errors import SubjectConfigNotFound
from narad.registry.errors import SubjectNotFound
from narad.registry.errors import SubjectNotSoftDeleted
from narad.registry.errors import SubjectSoftDeleted
from narad.registry.errors import TopicHistoryAppendOnly
from narad.registry.errors import VersionNotFound
from narad.registry.errors import VersionNotSoftDeleted
from narad.registry.errors import VersionSoftDeleted
from narad.registry.referrers import Referrers
from narad.registry.subjects import Version
from narad.registry.subjects import candidate_topics
from narad.registry.subjects import subject_of
from narad.registry.subjects import topic_of
from narad.schema.modes import DEFAULT
from narad.schema.modes import Mode
from narad.schema.references import references_bytes
from narad.schema.service import MAX_VERSIONS
from narad.schema.service import History
from narad.schema.service import SchemaService
from narad.schema.service import fingerprint
from narad.schema.service import history_of
from narad.schematypes import ParsedSchema
from narad.schematypes import SchemaOptions
from narad.schematypes import SchemaType
from narad.storage import SchemaVersion
from narad.storage import Status
from narad.storage import Storage
from narad.storage import StoredSchema
from narad.storage import Subject
from narad.storage import TopicChanges
from narad.storage import TopicMeta

__all__ = ("RegistryService", "parse_level", "references_bytes")

#: The type of a registration that names none, as in Confluent.
DEFAULT_REGISTRY_TYPE = "AVRO"
WRITE_ATTEMPTS = 8
_LIST_PAGE = 1000

#: Whether the caller may read a subject (the topic's record when the
#: subject is a topic's history, else None).
Readable = Callable[[str, TopicMeta | None], bool]


class RegistryService:
    def __init__(
        self,
        storage: Storage,
        records: TopicRecords,
        schemas: SchemaService,
        topics: TopicService,
    ) -> None:
        self.storage = storage
        self.records = records
        self.schemas = schemas
        self.topics = topics
        self.referrers = Referrers(storage)

    # -- routing -------------------------------------------------------------

    def route(self, subject: str, *, fresh: bool = False) -> TopicMeta | None:
        """The topic whose history ``subject`` is, or None: standalone.
        ``fresh``: read the record from storage, as a write does."""
        topic = topic_of(subject)
        if not topic:
            return None
        try:
            if fresh:
                return self.records.refresh(topic)
            return self.records.cached(topic)
        except TopicNotFound:
            return None

    def types(self) -> list[str]:
        """The schema types this node's plugins provide."""
        return sorted(self.schemas.types)

    def schema_type(self, name: str | None) -> SchemaType:
        """The type a registration names (Avro when none), 42201 for one no
        plugin provides."""
        name = name or DEFAULT_REGISTRY_TYPE
        found = self.schemas.types.get(name)
        if found is None:
            raise InvalidRegistrySchema(
                f"Invalid schema type {name[:100]!r}: this node takes "
                + ", ".join(self.types())
            )
        return found

    # -- reading -------------------------------------------------------------

    def topic_versions(self, meta: TopicMeta) -> list[Version]:
        """Every version of the topic's history with its global id; versions
        stored before ids get theirs now (:meth:`SchemaService.with_ids`)."""
        for _ in range(WRITE_ATTEMPTS):
            try:
                stored = self.schemas.with_ids(meta)
            except TopicNotFound:
                # Deleted, maybe created again, since the record was read.
                meta = self.records.refresh(meta.name)
                continue
            return [self._topic_version(meta, v) for v in stored]
        raise TopicKeptChanging(meta.name)

    @staticmethod
    def _topic_version(meta: TopicMeta, stored: SchemaVersion) -> Version:
        return Version(
            subject_of(meta.name),
            stored.version,
            stored.schema_id,
            meta.schema_type,
            stored.document,
            stored.references,
        )

    def _standalone_versions(self, found: Subject) -> list[Version]:
        kinds: dict[int, str] = {}
        shown = []
        for stored in found.versions:
            if stored.schema_id not in kinds:
                kinds[stored.schema_id] = self._type_of_id(stored.schema_id)
            shown.append(
                Version(
                    found.name,
                    stored.version,
                    stored.schema_id,
                    kinds[stored.schema_id],
                    stored.document,
                    stored.references,
                    stored.deleted,
                )
            )
        return shown

    def _type_of_id(self, schema_id: int) -> str:
        stored = self.storage.schema_by_id(schema_id)
        return stored.schema_type if stored is not None else DEFAULT_REGISTRY_TYPE

    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        """The subject's versions, ascending (soft-deleted ones too with
        ``deleted``).

        Raises:
            SubjectNotFound: it has none (40401).
        """
        meta = self.route(subject)
        if meta is not None:
            found = self.topic_versions(meta) if meta.schema_version else []
        else:
            standalone = self.storage.get_subject(subject)
            found = self._standalone_versions(standalone) if standalone else []
            if not deleted:
                found = [v for v in found if not v.deleted]
        if not found:
            raise SubjectNotFound(subject)
        return found

    def version(
        self, subject: str, number: int | None, *, deleted: bool = False
    ) -> Version:
        """Version ``number`` of the subject (None: the latest live one).

        Raises:
            SubjectNotFound: 40401. VersionNotFound: 40402.
        """
        every = self.versions(subject, deleted=True)
        live = [v for v in every if not v.deleted]
        if number is None:
            if not live:
                raise SubjectNotFound(subject)
            return live[-1]
        for found in every:
            if found.version == number and (deleted or not found.deleted):
                return found
        if not live and not deleted:
            raise SubjectNotFound(subject)
        raise VersionNotFound(subject, number)

    def by_id(self, schema_id: int) -> StoredSchema:
        """The schema a global id stands for.

        Raises:
            SchemaNotFound: an id never assigned (40403).
        """
        found = self.storage.schema_by_id(schema_id) if schema_id > 0 else None
        # Once no version holds an id, the storage keeps its number (never
        # reused) but not its schema: gone, as after Confluent's hard delete.
        if found is None or not found.document:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return found

    def uses(
        self, stored: StoredSchema, *, deleted: bool = False
    ) -> list[tuple[str, int]]:
        """The (subject, version) pairs holding ``stored``, sorted; soft-
        deleted versions of standalone subjects only with ``deleted``."""
        if deleted:
            return sorted(set(stored.uses))
        found = []
        subjects: dict[str, Subject | None] = {}
        for subject, number in stored.uses:
            if self.route(subject) is not None:
                found.append((subject, number))
                continue
            if subject not in subjects:
                subjects[subject] = self.storage.get_subject(subject)
            standalone = subjects[subject]
            if standalone is not None and any(
                v.version == number and not v.deleted for v in standalone.versions
            ):
                found.append((subject, number))
        return sorted(set(found))

    def list_subjects(
        self, prefix: str, *, deleted: bool, readable: Readable
    ) -> list[str]:
        """Every subject with a version (a live one unless ``deleted``) whose
        name starts with ``prefix`` and which ``readable`` lets the caller
        read, sorted."""
        names: set[str] = set()
        for subject in self.storage.list_subjects(prefix=prefix):
            if topic_of(subject) and self.route(subject) is not None:
                continue  # a topic took the name: its history answers
            if not deleted:
                found = self.storage.get_subject(subject)
                if found is None or all(v.deleted for v in found.versions):
                    continue
            if readable(subject, None):
                names.add(subject)
        topics = self._topic_names(prefix)
        metas = self.storage.get_topics(sorted(topics)) if topics else []
        for meta in metas:
            if meta is None or not meta.schema_version:
                continue
            subject = subject_of(meta.name)
            if subject.startswith(prefix) and readable(subject, meta):
                names.add(subject)
        return sorted(names)

    def _topic_names(self, prefix: str) -> set[str]:
        found = set(candidate_topics(prefix))
        after = ""
        while True:
            page = self.storage.list_topics(
                after=after, limit=_LIST_PAGE, prefix=prefix
            )
            found.update(page.names)
            if page.next_token is None:
                return found
            after = page.next_token

    # -- the schema of a request ---------------------------------------------

    def document(self, schema_type: SchemaType, schema: str) -> bytes:
        """What the type parses for Confluent's ``schema`` string."""
        return schema_type.registry_document(schema)

    def _parsed(
        self,
        history: History,
        schema_type: SchemaType,
        schema: str,
        references: bytes = b"",
    ) -> ParsedSchema:
        """``schema`` parsed as a version of ``history`` with ``references``
        (stored form), resolved first."""
        options = history.options
        if references:
            resolved = self.schemas.resolve_references(schema_type, references)
            options = replace(options, references=resolved)
        return self.schemas.parse(
            schema_type, self.document(schema_type, schema), options
        )

    @staticmethod
    def _standalone_history(subject: str, schema_type: SchemaType) -> History:
        return History(
            subject,
            schema_type.name,
            SchemaOptions(schema_type.default_encoding, payloads=False),
        )

    # -- registering ---------------------------------------------------------

    def register(
        self,
        subject: str,
        schema: str,
        schema_type: str | None,
        references: bytes = b"",
        *,
        epoch: str | None = None,
    ) -> int:
        """Register ``schema`` under ``subject``: its global id. A schema
        that is a live version of the subject already registers nothing
        and answers that version's id.

        ``epoch``: the topic incarnation its user owns, when owning the
        subject's topic is what allowed it.
        """
        kind = self.schema_type(schema_type)
        for _ in range(WRITE_ATTEMPTS):
            meta = self.route(subject, fresh=True)
            if meta is not None:
                return self._register_topic(meta, kind, schema, references, epoch)
            if epoch is not None:
                raise TopicNotFound(topic_of(subject) or subject)
            registered = self._register_standalone(subject, kind, schema, references)
            if registered is not None:
                return registered
            # A topic took the subject's name meanwhile: its history answers.
        raise TopicKeptChanging(topic_of(subject) or subject)

    def _register_topic(
        self,
        meta: TopicMeta,
        kind: SchemaType,
        schema: str,
        references: bytes,
        epoch: str | None,
    ) -> int:
        """Register under a topic's subject: a schema PATCH of the topic
        (:meth:`TopicService.alter`, so the topic's framing, mode, budgets
        and children are a PATCH's), unless the schema is a version of its
        history already."""
        raw = self.document(kind, schema)
        changes = TopicChanges(schema_type=kind.name)
        typed = self.schemas.settle_type(meta, changes)
        new = self.schemas.register_change(meta, typed, changes, raw, references)
        identity = fingerprint(kind.name, new, references)
        if meta.schema_version:
            known = self.storage.schema_id_of(identity)
            if known and any(v.schema_id == known for v in self.topic_versions(meta)):
                return known
        after, added = self.topics.alter(
            meta.name, changes, raw, None, epoch=epoch, references=references
        )
        if added:
            known = self.storage.schema_id_of(identity)
            if known:
                return known
        # No change (the same schema but for annotations): the current
        # version's id, which the registration answers.
        versions = self.topic_versions(after)
        current = [v for v in versions if v.version == after.schema_version]
        return current[0].schema_id if current else versions[-1].schema_id

    def _register_standalone(
        self, subject: str, kind: SchemaType, schema: str, references: bytes
    ) -> int | None:
        """The id registered, or None: a topic of the subject's name exists
        (created since the subject was routed)."""
        history = self._standalone_history(subject, kind)
        new = self._parsed(history, kind, schema, references)
        identity = fingerprint(kind.name, new, references)
        limits = self.schemas.limits()
        for _ in range(WRITE_ATTEMPTS):
            found = self.storage.get_subject(subject)
            live = [v for v in found.versions if not v.deleted] if found else []
            if live:
                known = self.storage.schema_id_of(identity)
                if known and any(v.schema_id == known for v in live):
                    return known
                latest = live[-1]
                stored_kind = self._type_of_id(latest.schema_id)
                if stored_kind != kind.name:
                    raise SchemaTypesDiffer(subject, stored_kind, kind.name)
                mode = Mode(self._mode(found))
                against = list(reversed(live)) if mode.transitive else [latest]
                no_change, report = self.schemas.check(
                    history, latest, against, new, mode, first=True, shortcut=True
                )
                if no_change and latest.references == references:
                    return latest.schema_id
                if report.findings:
                    raise IncompatibleWithEarlier(
                        subject, [str(f) for f in report.findings]
                    )
            version = SchemaVersion(
                0, new.stored, new.high_cost, identity=identity, references=references
            )
            result = self.storage.register_subject_version(
                subject,
                version,
                expected_latest=found.latest if found else 0,
                topic=topic_of(subject),
                limits=limits,
            )
            if result.status is Status.OK:
                return result.schema_id
            if result.status is Status.EXISTS:
                return None
            if result.status is Status.TOO_MANY_VERSIONS:
                raise TooManyVersions(subject, MAX_VERSIONS)
            self.schemas.raise_for_budget(result, subject)
            # BASE_MISMATCH: another version came first; check from there.
        raise TopicKeptChanging(subject)

    def lookup(
        self,
        subject: str,
        schema: str,
        schema_type: str | None,
        references: bytes = b"",
        *,
        deleted: bool = False,
    ) -> Version:
        """The subject's version holding ``schema``.

        Raises:
            SubjectNotFound: 40401. SchemaNotFound: 40403.
        """
        kind = self.schema_type(schema_type)
        versions = self.versions(subject, deleted=deleted)
        meta = self.route(subject)
        if meta is not None:
            if meta.schema_type != kind.name:
                raise SchemaNotFound()
            history = history_of(meta)
        else:
            history = self._standalone_history(subject, kind)
        new = self._parsed(history, kind, schema, references)
        known = self.storage.schema_id_of(fingerprint(kind.name, new, references))
        for version in reversed(versions):
            if known and version.schema_id == known:
                return version
        raise SchemaNotFound()

    # -- compatibility -------------------------------------------------------

    def check(
        self,
        subject: str,
        number: int | None,
        schema: str,
        schema_type: str | None,
        references: bytes = b"",
        *,
        every: bool = False,
    ) -> list[str]:
        """What registering ``schema`` under ``subject`` would meet: every
        violation's message (none: compatible). ``number``: that version
        only; None: the versions the subject's mode names (``every``: all
        of them).

        Raises:
            SubjectNotFound: 40401. VersionNotFound: 40402.
        """
        kind = self.schema_type(schema_type)
        versions = self.versions(subject)
        meta = self.route(subject)
        if meta is not None:
            if meta.schema_type != kind.name:
                return [_types_differ(subject, meta.schema_type, kind.name)]
            history = history_of(meta)
            mode = Mode(meta.compatibility)
        else:
            stored_kind = versions[-1].schema_type
            if stored_kind != kind.name:
                return [_types_differ(subject, stored_kind, kind.name)]
            history = self._standalone_history(subject, kind)
            mode = Mode(self._mode(self.storage.get_subject(subject)))
        new = self._parsed(history, kind, schema, references)
        stored = {v.version: _schema_version(v) for v in versions}
        latest = stored[versions[-1].version]
        if number is not None:
            if number not in stored:
                raise VersionNotFound(subject, number)
            against = [stored[number]]
        elif every or mode.transitive:
            against = [stored[v.version] for v in reversed(versions)]
        else:
            against = [latest]
        _, report = self.schemas.check(
            history,
            latest,
            against,
            new,
            mode,
            first=False,
            shortcut=False,
        )
        return [str(f) for f in report.findings]

    # -- deleting ------------------------------------------------------------

    def _standalone_or_refuse(self, subject: str) -> Subject:
        meta = self.route(subject, fresh=True)
        if meta is not None:
            if not meta.schema_version:
                raise SubjectNotFound(subject)
            raise TopicHistoryAppendOnly(subject, meta.name)
        found = self.storage.get_subject(subject)
        if found is None or not found.versions:
            raise SubjectNotFound(subject)
        return found

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        """Soft-delete every live version of a standalone subject, or
        (``permanent``) remove every soft-deleted one: the versions deleted.

        Raises:
            TopicHistoryAppendOnly: the subject is a topic's history.
            SubjectNotFound, SubjectSoftDeleted, SubjectNotSoftDeleted.
        """
        found = self._standalone_or_refuse(subject)
        live = [v.version for v in found.versions if not v.deleted]
        if permanent:
            if live:
                raise SubjectNotSoftDeleted(subject)
            numbers = [v.version for v in found.versions]
        else:
            if not live:
                raise SubjectSoftDeleted(subject)
            numbers = live
        self._check_unreferenced(subject, numbers, permanent)
        self._delete(subject, numbers, permanent)
        return numbers

    def delete_version(
        self, subject: str, number: int | None, *, permanent: bool
    ) -> int:
        """Soft-delete (or, once soft-deleted, remove) one version of a
        standalone subject (None: the latest live one); its number.

        Raises:
            TopicHistoryAppendOnly, SubjectNotFound, VersionNotFound,
            VersionSoftDeleted, VersionNotSoftDeleted.
        """
        found = self._standalone_or_refuse(subject)
        live = [v for v in found.versions if not v.deleted]
        if number is None:
            if not live:
                raise SubjectNotFound(subject)
            number = live[-1].version
        version = next((v for v in found.versions if v.version == number), None)
        if version is None:
            raise VersionNotFound(subject, number)
        if permanent and not version.deleted:
            raise VersionNotSoftDeleted(subject, number)
        if not permanent and version.deleted:
            raise VersionSoftDeleted(subject, number)
        self._check_unreferenced(subject, [number], permanent)
        self._delete(subject, [number], permanent)
        return number

    # -- references ----------------------------------------------------------

    def referenced_by(
        self, subject: str, number: int, *, deleted: bool = False
    ) -> list[int]:
        """The global ids of the schemas referencing version ``number`` of
        ``subject`` that some version holds (a live one, unless
        ``deleted``), ascending."""
        found = []
        for stored in self.referrers.candidates(subject, number):
            if self.uses(stored, deleted=deleted):
                found.append(stored.schema_id)
        return found

    def _check_unreferenced(
        self, subject: str, numbers: list[int], permanent: bool
    ) -> None:
        """Refuse (42206) to delete versions of ``subject`` that versions
        outside ``numbers`` reference: live ones for a soft delete, any
        stored one for a permanent delete (a soft-deleted version can still
        be read, and its references resolved)."""
        going = {(subject, n) for n in numbers}
        for number in numbers:
            for stored in self.referrers.candidates(subject, number):
                holders = set(self.uses(stored, deleted=permanent))
                if holders - going:
                    raise ReferenceExists(subject, number)

    def _delete(self, subject: str, numbers: list[int], permanent: bool) -> None:
        status = self.storage.delete_subject_versions(
            subject, numbers, permanent=permanent
        )
        if status is Status.NO_SUBJECT:
            raise SubjectNotFound(subject)
        if status is Status.NOT_DELETED:
            raise SubjectNotSoftDeleted(subject)

    # -- config --------------------------------------------------------------

    def global_mode(self) -> str:
        """The registry's default mode for standalone subjects."""
        return self.storage.registry_config() or DEFAULT.value

    def _mode(self, found: Subject | None) -> str:
        return (found.compatibility if found else "") or self.global_mode()

    def config(self, subject: str, *, default_to_global: bool) -> str:
        """A subject's mode: a topic's is the topic's; a standalone one's
        own, else (``default_to_global``) the registry's.

        Raises:
            SubjectConfigNotFound: none of its own (40408).
        """
        meta = self.route(subject)
        if meta is not None:
            return meta.compatibility
        found = self.storage.get_subject(subject)
        if found is not None and found.compatibility:
            return found.compatibility
        if default_to_global:
            return self.global_mode()
        raise SubjectConfigNotFound(subject)

    def set_config(
        self, subject: str | None, level: object, *, epoch: str | None = None
    ) -> str:
        """Set the registry's default (``subject`` None) or a subject's mode:
        a topic's subject sets the topic's mode, as a PATCH does."""
        mode = parse_level(level)
        if subject is None:
            self.storage.set_registry_config(mode.value)
            return mode.value
        meta = self.route(subject, fresh=True)
        if meta is not None:
            name = meta.name
            self.topics.alter(
                name, TopicChanges(compatibility=mode.value), None, None, epoch=epoch
            )
            return mode.value
        if epoch is not None:
            raise TopicNotFound(topic_of(subject) or subject)
        self.storage.set_subject_compatibility(subject, mode.value)
        return mode.value

    def delete_config(self, subject: str | None, *, epoch: str | None = None) -> str:
        """Clear the registry's default, or a subject's own mode (a topic's
        goes back to the default mode, BACKWARD): the mode it had."""
        if subject is None:
            before = self.global_mode()
            self.storage.set_registry_config("")
            return before
        meta = self.route(subject, fresh=True)
        if meta is not None:
            before = meta.compatibility
            self.topics.alter(
                meta.name,
                TopicChanges(compatibility=DEFAULT.value),
                None,
                None,
                epoch=epoch,
            )
            return before
        if epoch is not None:
            raise TopicNotFound(topic_of(subject) or subject)
        found = self.storage.get_subject(subject)
        if found is None or not found.compatibility:
            raise SubjectConfigNotFound(subject)
        self.storage.set_subject_compatibility(subject, "")
        return found.compatibility


def parse_level(level: object) -> Mode:
    """A ``compatibility`` value: one of the modes (42203 otherwise)."""
    try:
        if isinstance(level, str):
            return Mode(level)
    except ValueError:
        pass
    raise InvalidCompatibilityLevel(level, list(Mode))


def _types_differ(subject: str, stored: str, proposed: str) -> str:
    return (
        f"the schema history of {subject} is of type {stored}: a schema of type "
        f"{proposed} cannot join it"
    )


def _schema_version(version: Version) -> SchemaVersion:
    return SchemaVersion(
        version.version, version.document, False, references=version.references
    )
