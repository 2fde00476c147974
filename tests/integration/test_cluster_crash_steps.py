"""``kill -9`` between the two steps of a write that touches a topic's hash
slot and the global one, on the local Valkey Cluster.

A separate process runs the write through the cluster storage and kills
itself with SIGKILL at the point named (before or after the step in the
topic's slot; see :mod:`narad_redis.sharded` for the order). What it leaves
must be what the module says, and repaired the way it says: every listed
topic exists, the byte budget never counts less than is stored, a crash
residue is cleared by a retry or by ``repair()``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid

import pytest

import narad_redis
from narad.config import Config
from narad.storage import Status
from narad.testing.storage_contract import LIMITS
from narad.testing.storage_contract import new_meta
from narad.testing.storage_contract import schema_version
from narad_redis import sharded
from tests.nodes import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("valkey_cluster")]

DOC = b'{"type":"object","title":"crash"}'

# The write, run by a process that dies at ``where`` ("before" or "after"
# the base class's method, i.e. the step in the topic's slot).
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from narad.config import Config
    from narad.testing.storage_contract import LIMITS, new_meta, schema_version
    from narad_redis.storage import RedisStorage
    import narad_redis

    url, method, where, name, parent = sys.argv[1:]
    storage = narad_redis.connect(url, Config.load(env={}))
    original = getattr(RedisStorage, method)

    def dying(self, *args, **kwargs):
        if where == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        original(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(RedisStorage, method, dying)
    doc = b'{"type":"object","title":"crash"}'
    if method == "create_topic":
        storage.create_topic(new_meta(name=name), schema_version(1, doc), limits=LIMITS)
    elif method == "delete_topic":
        storage.delete_topic(storage.get_topic(name))
    elif method == "create_child":
        above = storage.get_topic(parent)
        storage.create_child(new_meta(name=name), above, delay_ms=0, limits=LIMITS,
                             max_children=108)
    """
)


@pytest.fixture
def storage(valkey_cluster):
    backend = narad_redis.connect(valkey_cluster.url, Config.load(env={}))
    yield backend
    backend.close()


def killed(url: str, method: str, where: str, name: str, parent: str = "") -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, method, where, name, parent],
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}"},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]


def listed(storage, name: str) -> bool:
    return name in storage.list_topics(after="", limit=1000, prefix=name).names


def budget(storage) -> int:
    return int(storage.client.call(lambda r: r.get(storage.SCHEMA_BYTES)) or 0)


def name() -> str:
    return f"crash-{uuid.uuid4().hex}"


def test_create_killed_after_its_topic_step_leaves_a_topic_a_retry_lists(
    storage, valkey_cluster
):
    topic, before = name(), budget(storage)
    killed(valkey_cluster.url, "create_topic", "after", topic)
    # Stored and counted, not listed yet: never listed without existing.
    assert storage.get_topic(topic).schema_version == 1
    assert not listed(storage, topic)
    assert budget(storage) == before + len(DOC)
    retried = storage.create_topic(
        new_meta(name=topic), schema_version(1, DOC), limits=LIMITS
    )
    assert retried.status is Status.EXISTS
    assert listed(storage, topic)
    assert budget(storage) == before + len(DOC)


def test_create_killed_before_its_topic_step_over_counts_until_repair(
    storage, valkey_cluster
):
    topic, before = name(), budget(storage)
    killed(valkey_cluster.url, "create_topic", "before", topic)
    # Bytes reserved (and the id given) for a topic that never came.
    assert storage.get_topic(topic) is None
    assert not listed(storage, topic)
    assert budget(storage) == before + len(DOC)
    # What an operator runs after a crash: `narad storage repair`.
    done = subprocess.run(
        [sys.executable, "-m", "narad.cli", "storage", "repair"],
        env={
            "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}",
            "NARAD_STORAGE_URL": valkey_cluster.url,
        },
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout)["bytes_released"] == len(DOC)
    assert budget(storage) == before
    made = storage.create_topic(
        new_meta(name=topic), schema_version(1, DOC), limits=LIMITS
    )
    assert made.status is Status.OK
    assert listed(storage, topic)
    assert budget(storage) == before + len(DOC)


def test_delete_killed_after_unlisting_leaves_a_topic_a_retry_deletes(
    storage, valkey_cluster
):
    topic = name()
    storage.create_topic(new_meta(name=topic), schema_version(1, DOC), limits=LIMITS)
    before = budget(storage)
    killed(valkey_cluster.url, "delete_topic", "before", topic)
    meta = storage.get_topic(topic)
    assert meta is not None and not listed(storage, topic)
    assert budget(storage) == before
    assert storage.delete_topic(meta) is Status.OK
    assert storage.get_topic(topic) is None
    assert budget(storage) == before - len(DOC)


def test_delete_killed_after_its_topic_step_over_counts_until_repair(
    storage, valkey_cluster
):
    topic = name()
    storage.create_topic(new_meta(name=topic), schema_version(1, DOC), limits=LIMITS)
    before = budget(storage)
    killed(valkey_cluster.url, "delete_topic", "after", topic)
    assert storage.get_topic(topic) is None and not listed(storage, topic)
    assert budget(storage) == before
    assert storage.repair()["bytes_released"] == len(DOC)
    assert budget(storage) == before - len(DOC)


def test_a_child_killed_after_its_name_claim_frees_the_name_after_a_while(
    storage, valkey_cluster, monkeypatch
):
    parent, child = name(), name()
    storage.create_topic(new_meta(name=parent), None)
    killed(valkey_cluster.url, "create_child", "before", child, parent)
    # The name is claimed (a stub), the child absent and unlisted.
    assert storage.get_topic(child) is None and not listed(storage, child)
    above = storage.get_topic(parent)
    again = new_meta(name=child)

    def create():
        return storage.create_child(
            again, above, delay_ms=0, limits=LIMITS, max_children=108
        )

    assert create().status is Status.EXISTS
    monkeypatch.setattr(sharded, "CLAIM_TIMEOUT_MS", 0)
    assert create().status is Status.OK
    assert storage.get_topic(child).parent == parent
    assert listed(storage, child)


def test_repair_unlists_no_topic_created_while_it_scans(
    storage, valkey_cluster, monkeypatch
):
    # `narad storage repair` on a live cluster: a topic created once the
    # scan has passed its slot is stored, then listed, by the time the
    # repair reads the index. It is no ghost; a name listed with no topic is.
    topic, ghost = name(), name()
    storage.client.call(lambda r: r.zadd(storage.TOPICS, {ghost: 0}))
    creator = narad_redis.connect(valkey_cluster.url, Config.load(env={}))
    scan = storage.client.each_primary

    def scan_then_create(fn):
        found = scan(fn)
        assert creator.create_topic(new_meta(name=topic)).status is Status.OK
        return found

    monkeypatch.setattr(storage.client, "each_primary", scan_then_create)
    try:
        storage.repair()
    finally:
        creator.close()
    assert listed(storage, topic)
    assert not listed(storage, ghost)
