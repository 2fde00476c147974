"""The messaging and fan-out HTTP tests on a node over the local Valkey
Cluster (3 primaries, 3 replicas), and what only a cluster has: topics
spread over the primaries, a family in its parent's slot, an attach across
slots refused.

The messaging and wake-up tests (test_messaging_http.py,
test_wakeups_http.py) run here as they are, on a node of their own over the
session's cluster, wake-ups coming from whichever primary holds the topic;
so do the fan-out tests of test_fanout_http.py that build their families by
creating children (those that attach a topic created on its own get the 409
tested below on a cluster, and the one killing workers has its own Valkey).
"""

from __future__ import annotations

import pytest
import redis

from tests.integration.test_fanout_http import storage  # noqa: F401
from tests.integration.test_fanout_http import test_a_delay_child_is_never_early  # noqa: F401
from tests.integration.test_fanout_http import (  # noqa: F401
    test_a_detached_delay_child_keeps_its_copies_due_when_they_were,
)
from tests.integration.test_fanout_http import (  # noqa: F401
    test_an_immediate_child_is_a_topic_of_its_own,
)
from tests.integration.test_fanout_http import (  # noqa: F401
    test_deleting_a_parent_or_a_child_undoes_the_links,
)
from tests.integration.test_fanout_http import (  # noqa: F401
    test_lag_and_stats_read_timestamps_not_payloads,
)
from tests.integration.test_messaging_http import *  # noqa: F403
from tests.integration.test_messaging_http import consume
from tests.integration.test_messaging_http import make
from tests.integration.test_messaging_http import produce
from tests.integration.test_wakeups_http import *  # noqa: F403
from tests.nodes import Node

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("valkey_cluster")]


@pytest.fixture(scope="module")
def storage_url(valkey_cluster) -> str:
    return valkey_cluster.url


@pytest.fixture(scope="module")
def node(storage_url, tmp_path_factory) -> Node:
    started = Node(tmp_path_factory.mktemp("cluster-node"), storage_url=storage_url)
    started.start()
    yield started
    started.stop()


def listed_names(http) -> list[str]:
    """Every topic the listing names, page by page: the session's cluster
    holds the topics of every test before, and the listing takes no prefix."""
    names, token = [], ""
    while True:
        page = http.get(f"/v1/topics?limit=100&page_token={token}").json()
        names += [t["name"] for t in page["topics"]]
        token = page["next_page_token"]
        if token is None:
            return names


def test_topics_spread_over_every_primary(http, topic, valkey_cluster):
    owners = set()
    for n in range(12):
        name = f"{topic}-{n}"
        make(http, name, partitions=1)
        assert produce(http, name, f"m{n}").status == 202
        owners.add(valkey_cluster.primary_of(f"narad:{{{name}}}:meta").port)
    assert len(owners) == 3
    assert sorted(n for n in listed_names(http) if n.startswith(topic)) == sorted(
        f"{topic}-{n}" for n in range(12)
    )
    for n in range(12):
        got = consume(http, f"{topic}-{n}")
        assert (got.status, got.json()["payload"]) == (200, f"m{n}")


def test_a_family_lives_in_its_parents_slot(http, topic, valkey_cluster):
    parent, child = f"{topic}-parent", f"{topic}-child"
    make(http, parent, partitions=2)
    resp = http.post("/v1/topics", {"name": child, "parent": parent})
    assert resp.status == 201, resp.data
    assert produce(http, parent, "copied").status == 202
    got = consume(http, child, wait="5s")
    assert (got.status, got.json()["payload"]) == (200, "copied")
    with redis.Redis(port=valkey_cluster.primary_of(parent).port) as r:
        # The child's record sits beside its parent's; its name's key
        # holds only the stub saying where.
        assert r.hget(f"narad:{{{parent}}}/{child}:meta", "name") == child.encode()
    stub = valkey_cluster.primary_of(child)
    with redis.Redis(port=stub.port) as r:
        assert r.hgetall(f"narad:{{{child}}}:meta")[b"home"] == parent.encode()
    assert http.get(f"/v1/topics/{child}").json()["parent"] == parent


def test_attaching_a_topic_from_another_slot_is_refused(http, topic):
    parent, other = f"{topic}-parent", f"{topic}-other"
    make(http, parent)
    make(http, other)
    resp = http.post(f"/v1/topics/{parent}/children", {"child": other})
    assert resp.status == 409
    error = resp.json()["error"]
    assert "another hash slot" in error
    assert f'"parent": "{parent}"' in error
    assert http.get(f"/v1/topics/{other}").json().get("parent", "") == ""


def test_a_detached_child_can_be_attached_again(http, topic):
    parent, child = f"{topic}-parent", f"{topic}-child"
    make(http, parent)
    assert http.post("/v1/topics", {"name": child, "parent": parent}).status == 201
    assert http.delete(f"/v1/topics/{parent}/children/{child}").status == 204
    assert produce(http, parent, "not copied").status == 202
    resp = http.post(f"/v1/topics/{parent}/children", {"child": child})
    assert resp.status == 200, resp.data
    assert produce(http, parent, "copied").status == 202
    got = consume(http, child, wait="5s")
    assert (got.status, got.json()["payload"]) == (200, "copied")
