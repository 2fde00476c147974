"""What the Redis backend calls durable, from the server's INFO and CONFIG."""

from __future__ import annotations

import pytest
from redis.exceptions import NoPermissionError

from narad_redis.storage import _durability

MEMORY = {"maxmemory_policy": "noeviction", "used_memory": 1, "maxmemory": 0}
AOF = {"aof_enabled": 1, "aof_last_write_status": "ok"}
DENIED = NoPermissionError("User narad has no permissions to run 'config|get'")


@pytest.mark.parametrize(
    ("memory", "persistence", "raft", "fsync", "durable", "detail"),
    [
        (MEMORY, AOF, {}, {"appendfsync": "always"}, True, "appendfsync always"),
        (MEMORY, AOF, {}, {"appendfsync": "everysec"}, False, "everysec, not always"),
        (MEMORY, AOF, {}, {"appendfsync": "no"}, False, "appendfsync is no"),
        (
            MEMORY,
            AOF,
            {},
            {"appendfsync": "always", "no-appendfsync-on-rewrite": "yes"},
            False,
            "no-appendfsync-on-rewrite is yes",
        ),
        (
            MEMORY,
            AOF,
            {},
            {"appendfsync": "always", "no-appendfsync-on-rewrite": "no"},
            True,
            "appendfsync always",
        ),
        (MEMORY, {"aof_enabled": 0}, {}, {"appendfsync": "always"}, False, "is off"),
        (MEMORY, {**AOF, "aof_last_write_status": "err"}, {}, {}, False, "failed"),
        (MEMORY, AOF, {}, DENIED, False, "appendfsync cannot be read"),
        (MEMORY, {"aof_enabled": 0}, {}, DENIED, False, "appendonly is off"),
        (MEMORY, {"aof_enabled": 0}, {"raft_role": "leader"}, DENIED, True, "Raft"),
        (
            {**MEMORY, "maxmemory_policy": "allkeys-lru"},
            AOF,
            {},
            {"appendfsync": "always"},
            False,
            "may evict",
        ),
    ],
)
def test_durability(memory, persistence, raft, fsync, durable, detail):
    found, words = _durability(memory, persistence, raft, fsync)
    assert found is durable
    assert detail in words
