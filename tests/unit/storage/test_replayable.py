"""Which storage calls the Redis backend lets its client send again after a
link lost mid-call (see narad_redis.client): the one place it is decided."""

from __future__ import annotations

import uuid

from narad.config import Config
from narad.storage import Entry
from narad.storage import IdempotencyKey
from narad.storage import Lease
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.testing.storage_contract import new_meta
from narad.testing.storage_contract import new_user
from narad_redis import fakeredis


def test_only_writes_whose_rerun_is_harmless_are_replayable(monkeypatch):
    storage = fakeredis.connect(f"fakeredis://{uuid.uuid4().hex}", Config.load(env={}))
    seen: list[bool] = []
    call = storage.client.call

    def recording(fn, *, replayable=True, **options):
        seen.append(replayable)
        return call(fn, replayable=replayable, **options)

    monkeypatch.setattr(storage.client, "call", recording)

    def last(step) -> bool:
        seen.clear()
        step()
        return seen[-1]

    meta = new_meta(partitions=1)
    assert not last(lambda: storage.create_topic(meta))
    assert last(lambda: storage.get_topic(meta.name))
    entries = [Entry(0, b"", b"m", PayloadKind.TEXT)] * 2

    def append(*guards: IdempotencyKey):
        storage.append(meta, entries, schema_version=0, now_ms=0, idempotency=guards)

    assert not last(append)
    assert not last(lambda: append(IdempotencyKey("a", "d", 0, 1)))
    assert last(
        lambda: append(IdempotencyKey("b", "d", 0, 1), IdempotencyKey("c", "d", 1, 2))
    )
    assert last(lambda: storage.reserve(meta, [0], nonce="n" * 16, now_ms=0))
    lease = [Lease(0, 0, "n" * 16)]
    for action, again in (
        (Settle.EXTEND, True),
        (Settle.RELEASE, False),
        (Settle.ACK, True),
    ):
        assert (
            last(lambda a=action: storage.settle_batch(meta, lease, action=a, now_ms=0))
            is again
        )
    # User writes are not: a rerun would answer exists, stale or no user
    # for a change that was made.
    user = new_user(admin=True)
    assert not last(lambda: storage.create_user(user))
    assert last(lambda: storage.get_user(user.name))
    assert not last(
        lambda: storage.replace_grants(user.name, user.grants, admin=True, revision=1)
    )
    assert not last(lambda: storage.set_password(user.name, "x", revision=2))
    assert not last(lambda: storage.delete_user(user.name, revision=3))
    storage.close()
