"""The Redis backend reads a topic stored before schema types existed (a
record with no ``schema_type``, ``encoding`` or ``proto_message`` field) as a
JSON Schema topic over JSON payloads, and its children adopt that (fakeredis)."""

from __future__ import annotations

import uuid

from narad.config import Config
from narad.storage import SchemaLimits
from narad.storage import Status
from narad.testing.storage_contract import new_meta
from narad.testing.storage_contract import schema_version
from narad_redis import fakeredis

LIMITS = SchemaLimits(1 << 22, 1 << 28, 1000)
FIELDS = ("schema_type", "encoding", "proto_message")


def test_a_record_without_schema_settings_reads_as_json():
    storage = fakeredis.connect(f"fakeredis://{uuid.uuid4().hex}", Config.load(env={}))
    try:
        meta = new_meta()
        first = schema_version(1, b'{"type":"object"}', False)
        assert storage.create_topic(meta, first, limits=LIMITS).status is Status.OK
        storage.client.redis.hdel(f"narad:{{{meta.name}}}:meta", *FIELDS)
        assert not any(
            storage.client.redis.hexists(f"narad:{{{meta.name}}}:meta", f)
            for f in FIELDS
        )
        stored = storage.get_topic(meta.name)
        assert (stored.schema_type, stored.encoding, stored.proto_message) == (
            "JSON",
            "json",
            "",
        )
        assert stored.schema_version == 1
        # A child created under it, and one attached to it, take JSON/json.
        child = new_meta(schema_type="AVRO", encoding="binary")
        made = storage.create_child(
            child, stored, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert made.status is Status.OK
        adopted = storage.get_topic(child.name)
        assert (adopted.schema_type, adopted.encoding, adopted.schema_version) == (
            "JSON",
            "json",
            1,
        )
    finally:
        storage.close()
