"""The Redis backend reads a topic stored before owners existed (a record
with no ``owner`` field) as unowned, not as missing (fakeredis)."""

from __future__ import annotations

import uuid

from narad.config import Config
from narad.storage import Status
from narad.testing.storage_contract import new_meta
from narad_redis import fakeredis


def test_a_record_without_an_owner_field_is_unowned():
    storage = fakeredis.connect(f"fakeredis://{uuid.uuid4().hex}", Config.load(env={}))
    try:
        meta = new_meta(owner="alice")
        assert storage.create_topic(meta).status is Status.OK
        storage.client.redis.hdel(f"narad:{{{meta.name}}}:meta", "owner")
        assert storage.topic_owners([meta.name, new_meta().name]) == ["", None]
        assert storage.get_topic(meta.name).owner == ""
    finally:
        storage.close()
