"""The client follows -MOVED and retries CLUSTERDOWN, TRYAGAIN, lost links."""

from __future__ import annotations

import pytest

from narad.errors import StorageError
from narad_redis.client import RetryingClient
from tests.unit.storage.fakeresp import ScriptedServer


@pytest.fixture
def servers():
    started: list[ScriptedServer] = []

    def start(replies):
        server = ScriptedServer(replies)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def get(client: RetryingClient):
    return client.call(lambda r: r.get("k"))


def client_for(server: ScriptedServer, sleeps: list[float], attempts: int = 5):
    return RetryingClient(
        server.url,
        attempts=attempts,
        backoff_s=0.01,
        backoff_max_s=0.03,
        sleep=sleeps.append,
    )


def test_clusterdown_is_retried_with_growing_backoff(servers):
    server = servers([b"-CLUSTERDOWN The cluster is down\r\n"] * 2 + [b"$2\r\nok\r\n"])
    sleeps: list[float] = []
    assert get(client_for(server, sleeps)) == b"ok"
    assert sleeps == [0.01, 0.02]


def test_tryagain_is_retried(servers):
    server = servers(
        [b"-TRYAGAIN Multiple keys request during rehashing\r\n", b"$1\r\nx\r\n"]
    )
    sleeps: list[float] = []
    assert get(client_for(server, sleeps)) == b"x"
    assert sleeps == [0.01]


def test_lost_connection_is_retried(servers):
    server = servers([None, b"$1\r\ny\r\n"])
    sleeps: list[float] = []
    assert get(client_for(server, sleeps)) == b"y"
    assert len(sleeps) == 1


def test_moved_is_followed_to_the_leader_without_waiting(servers):
    leader = servers([b"$6\r\nleader\r\n"])
    follower = servers([f"-MOVED 3999 127.0.0.1:{leader.port}\r\n".encode()])
    sleeps: list[float] = []
    client = client_for(follower, sleeps)
    assert get(client) == b"leader"
    assert sleeps == []
    assert client.redis.connection_pool.connection_kwargs["port"] == leader.port
    get(client)  # and stays with the leader
    assert leader.seen == ["GET", "GET"]
    assert follower.seen == ["GET"]


def test_retries_are_bounded(servers):
    server = servers([b"-CLUSTERDOWN down\r\n"] * 50)
    sleeps: list[float] = []
    with pytest.raises(StorageError, match="after 3 retries"):
        get(client_for(server, sleeps, attempts=3))
    assert sleeps == [0.01, 0.02, 0.03]
    assert len(server.seen) == 4


def test_scripts_follow_moved_too(servers):
    leader = servers([b":7\r\n"])
    follower = servers([f"-MOVED 1 127.0.0.1:{leader.port}\r\n".encode()])
    client = client_for(follower, [])
    script = client.redis.register_script("return 7")
    assert client.call(lambda r: script(keys=[], args=[], client=r)) == 7
