"""Framed messages: Confluent's wire format on topics with ``framing: confluent``.

Kafka clients' serializers (Confluent's, and every registry-aware one) write
each message as the magic byte ``0``, a 4-byte big-endian global schema id,
then the payload. A topic whose record says ``framing: confluent`` takes
only such messages on produce (to the topic itself; a child's copies are its
parent's accepted messages), and stores them as sent, so the deserializers
read what consumers receive:

- the id must be the global id of a version of the topic's history: any
  version, not only the current one, since a producer on an older schema
  keeps writing (the registry's ``<topic>-value`` subject is the history);
- what follows is validated under that version in the type's
  :attr:`~narad.schematypes.SchemaType.framed_encoding`, as Confluent's
  serializers write it: a JSON text for JSON Schema, a binary datum for
  Avro, message indexes then the binary message for Protobuf
  (:meth:`~narad.schematypes.SchemaType.compile_framed`), whatever the
  record's ``encoding`` says.

Anything else is 400 naming what is wrong: no magic byte, a message shorter
than the 5-byte header, an id no schema has, an id of other subjects only,
or a payload the version refuses (the type's own words, after the id and
version it was checked under).

Two caches per worker, both dropped with the topic as the validators are
(:meth:`narad.broker.records.TopicRecords.attach`): which id is which version
of a topic, per (topic, epoch, schema version), read from the history once;
and each version's compiled framed check, per (topic, epoch, version).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from narad import metrics
from narad.caches import BoundedCache
from narad.errors import CapacityBusy
from narad.errors import InvalidArgument
from narad.errors import InvalidPayload
from narad.errors import SchemaUnusable
from narad.errors import SchemaVersionNotFound
from narad.quoting import quote
from narad.schematypes import Compiled
from narad.schematypes import SchemaOptions
from narad.schematypes import SchemaType
from narad.schematypes import UnusableVersion
from narad.serve import offload
from narad.storage import DEFAULT_FRAMING
from narad.storage import SchemaVersion
from narad.storage import TopicMeta

if TYPE_CHECKING:
    from narad.schema.service import SchemaService

__all__ = (
    "CONFLUENT",
    "FRAMINGS",
    "HEADER",
    "MAGIC",
    "NONE",
    "FramedChecks",
    "check_framing",
    "split_frame",
)

NONE = DEFAULT_FRAMING
CONFLUENT = "confluent"
#: Every value of a topic's ``framing``, the default first.
FRAMINGS = (NONE, CONFLUENT)
MAGIC = 0
#: The magic byte and the 4-byte schema id.
HEADER = 5
#: Topics whose id maps a worker keeps (an entry is a few bytes per version).
CACHED_ID_MAPS = 4096

_Key = tuple[str, str, int]  # topic, epoch, schema version


def split_frame(payload: bytes) -> tuple[int, bytes]:
    """The schema id of a framed message and what follows it.

    Raises:
        InvalidPayload: no magic byte, or shorter than the header.
    """
    if not payload or payload[0] != MAGIC:
        shown = f"byte 0x{payload[0]:02x}" if payload else "an empty message"
        raise InvalidPayload(
            "payload is not framed: a message to a topic with framing "
            "confluent starts with magic byte 0 and a 4-byte schema id "
            f"(Confluent's wire format), got {shown}"
        )
    if len(payload) < HEADER:
        raise InvalidPayload(
            f"payload is {len(payload)} bytes, shorter than the framing "
            "header: magic byte 0 and a 4-byte big-endian schema id"
        )
    return int.from_bytes(payload[1:HEADER], "big"), payload[HEADER:]


def check_framing(schema_type: SchemaType, encoding: str, framing: str) -> None:
    """Refuse (400) a topic framed with Confluent's wire format whose
    payloads would be in another encoding than the one Confluent's
    serializers write for its type (:attr:`SchemaType.framed_encoding`)."""
    framed = schema_type.framed_encoding
    if framing == CONFLUENT and encoding != framed:
        raise InvalidArgument(
            f"framing confluent takes {schema_type.name} payloads in the "
            f"{framed} encoding, as Confluent's serializers write them, but the "
            f"topic's encoding would be {encoding}: give encoding {framed} (it "
            "changes only together with a schema, and never once the topic has "
            "one)"
        )


def _topic_of(key: _Key) -> str:
    return key[0]


def _current(key: _Key, meta: TopicMeta) -> bool:
    return key[1:] == (meta.epoch, meta.schema_version)


def _same_epoch(key: _Key, meta: TopicMeta) -> bool:
    # Versions never change: every one of the topic's incarnation stays good.
    return key[1] == meta.epoch and key[2] <= meta.schema_version


def _count(outcome: str) -> None:
    metrics.TALLY.inc(metrics.SCHEMA_VALIDATIONS, (outcome,))


class FramedChecks:
    """The produce check of framed topics, for one schema service."""

    def __init__(self, service: SchemaService, *, large_payload: int) -> None:
        """``large_payload``: payload bytes past which a check runs on a
        pool thread under a capacity slot, as the service's own do."""
        self.service = service
        self.large_payload = large_payload
        # id -> (version, high cost), per (topic, epoch, schema version).
        self.ids: BoundedCache[_Key, dict[int, tuple[int, bool]]] = BoundedCache(
            "framed_ids", max_entries=CACHED_ID_MAPS, topic_of=_topic_of
        )
        # A str where the version cannot be used: why.
        self.validators: BoundedCache[_Key, Compiled | str] = BoundedCache(
            "framed_validators",
            max_entries=service.validators.max_entries,
            max_bytes=service.validators.max_bytes,
            topic_of=_topic_of,
        )
        service.records.attach(self.ids, _current, kept_on_change=False)
        service.records.attach(self.validators, _same_epoch, kept_on_change=False)

    def check(self, meta: TopicMeta) -> Callable[[bytes], None]:
        """The check of a produce to the framed topic ``meta``, counting
        each outcome as the service's check does."""
        ids = self._ids(meta)

        def check(payload: bytes) -> None:
            version = 0
            try:
                schema_id, body = split_frame(payload)
                found = ids.get(schema_id)
                if found is None:
                    found = self._not_in_history(meta, schema_id)
                version, high_cost = found
                compiled = self._validator(meta, version)
                try:
                    if high_cost or len(body) > self.large_payload:
                        self._bounded(compiled, body)
                    else:
                        compiled.validate(body)
                except InvalidPayload as exc:
                    raise InvalidPayload(
                        f"framed with schema id {schema_id} (version {version} "
                        f"of {meta.name}): {exc.detail}"
                    ) from None
            except InvalidArgument:
                _count("invalid")
                raise
            except CapacityBusy:
                _count("busy")
                raise
            except UnusableVersion as exc:
                key = (meta.name, meta.epoch, version)
                self.validators.put(key, exc.reason, len(exc.reason))
                raise SchemaUnusable(meta.name, version, exc.reason) from None
            _count("valid")

        return check

    def _bounded(self, compiled: Compiled, payload: bytes) -> None:
        with self.service.capacity.slot():
            offload.run(compiled.validate, payload)

    # -- ids -----------------------------------------------------------------

    def _ids(self, meta: TopicMeta) -> dict[int, tuple[int, bool]]:
        """Which global id is which version of ``meta``'s history, up to its
        current version."""
        key = (meta.name, meta.epoch, meta.schema_version)
        cached = self.ids.get(key)
        if cached is not None:
            return cached
        # Versions stored before global ids get theirs here, once.
        history = [
            v for v in self.service.with_ids(meta) if v.version <= meta.schema_version
        ]
        found = {v.schema_id: (v.version, v.high_cost) for v in history if v.schema_id}
        self.ids.put(key, found, 64 * len(found))
        return found

    def _not_in_history(self, meta: TopicMeta, schema_id: int) -> tuple[int, bool]:
        """The version ``schema_id`` is of a history that moved on since
        ``meta`` was read; else the refusal saying whose id it is."""
        stored = self.service.storage.schema_by_id(schema_id) if schema_id else None
        if stored is None:
            raise InvalidPayload(
                f"payload's schema id {schema_id} is no registered schema: a "
                f"framed message carries the id of a version of {meta.name}'s "
                f"history (the registry subject {quote(meta.name + '-value')})"
            )
        subject = f"{meta.name}-value"
        mine = [version for name, version in stored.uses if name == subject]
        if mine and max(mine) > meta.schema_version:
            # A version registered since this worker read the record.
            fresh = self.service.records.refresh(meta.name, epoch=meta.epoch)
            found = self._ids(fresh).get(schema_id)
            if found is not None:
                return found
        subjects = sorted({name for name, _ in stored.uses})
        shown = ", ".join(quote(s) for s in subjects[:5]) + (
            ", ..." if len(subjects) > 5 else ""
        )
        held = f"it is a schema of {shown}" if subjects else "no subject holds it now"
        raise InvalidPayload(
            f"payload's schema id {schema_id} is not a version of {meta.name}'s "
            f"history (the registry subject {quote(subject)}): {held}"
        )

    # -- validators ----------------------------------------------------------

    def _validator(self, meta: TopicMeta, version: int) -> Compiled:
        key = (meta.name, meta.epoch, version)
        cached = self.validators.get(key)
        if cached is None:
            stored = self.service.storage.get_schema(meta.name, version)
            if stored is None:
                raise SchemaVersionNotFound(meta.name, version)
            uri = f"narad://schema/{meta.name}/{version}"
            try:
                # References are read here, on the event loop.
                options = self._options(meta, stored)
                cached = offload.run(self._compile, meta, stored, uri, options)
                size = cached.estimated_bytes
            except UnusableVersion as exc:
                cached, size = exc.reason, len(exc.reason)
            self.validators.put(key, cached, size)
        if isinstance(cached, str):
            raise SchemaUnusable(meta.name, version, cached)
        return cached

    def _options(self, meta: TopicMeta, stored: SchemaVersion) -> SchemaOptions:
        schema_type = self.service.types.get(meta.schema_type)
        if schema_type is None:
            raise UnusableVersion(
                f"its schema type {meta.schema_type} is provided by no plugin of "
                "this node: load that type's plugin (see plugins.disabled and "
                "`narad plugins`)"
            )
        return self.service.stored_options(
            meta.schema_type,
            SchemaOptions(schema_type.framed_encoding, meta.proto_message),
            stored.references,
        )

    def _compile(
        self,
        meta: TopicMeta,
        stored: SchemaVersion,
        uri: str,
        options: SchemaOptions,
    ) -> Compiled:
        schema_type = self.service.types[meta.schema_type]
        loaded = schema_type.load(stored.document, options)
        return schema_type.compile_framed(loaded, options, uri)
