"""The client follows -MOVED, retries transient replies and lost links, and
asks the other known nodes when the one it talks to is gone."""

from __future__ import annotations

import socket

import pytest
import redis

from narad.errors import InvalidConfiguration
from narad.errors import StorageError
from narad.errors import StorageUncertain
from narad_redis.client import Address
from narad_redis.client import RetryingClient
from narad_redis.client import parse_seeds
from tests.unit.storage.fakeresp import HANG
from tests.unit.storage.fakeresp import ScriptedServer


@pytest.fixture
def servers():
    started: list[ScriptedServer] = []

    def start(replies, info=""):
        server = ScriptedServer(replies, info)
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


# -- several nodes ------------------------------------------------------------


# Sockets bound and never listening: their ports refuse connections, and no
# other test (the suite runs in parallel) can take them while they are held.
_DEAD: list[socket.socket] = []


def dead_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    _DEAD.append(sock)
    return sock.getsockname()[1]


def seeds_client(ports: list[int], sleeps: list[float], **options) -> RetryingClient:
    url = "redis://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "/0"
    return RetryingClient(
        url, backoff_s=0.01, backoff_max_s=0.03, sleep=sleeps.append, **options
    )


def test_a_refused_seed_is_passed_over_for_the_next_without_waiting(servers):
    alive = servers([b"$2\r\nok\r\n", b"$2\r\nok\r\n"])
    sleeps: list[float] = []
    client = seeds_client([dead_port(), alive.port], sleeps)
    assert get(client) == b"ok"
    assert get(client) == b"ok"  # and stays there
    assert sleeps == []
    assert client.address == Address("127.0.0.1", alive.port)


def test_peers_naming_a_dead_leader_are_asked_in_turn_until_one_knows(servers):
    """After a leader dies its peers name it for a while (MOVED); the client
    does not keep going back to it but asks the next node after a backoff."""
    dead = dead_port()
    moved = f"-MOVED 0 127.0.0.1:{dead}\r\n".encode()
    follower = servers([moved] * 10)
    new_leader = servers([b"$3\r\nnew\r\n"])
    sleeps: list[float] = []
    # The clock moves only by the backoffs: the dead leader's 30 ms down mark
    # must not lapse between two replies on a slow machine (it did on CI,
    # and the follower was asked a third time).
    client = seeds_client(
        [follower.port, new_leader.port], sleeps, clock=lambda: sum(sleeps)
    )
    assert get(client) == b"new"
    assert Address("127.0.0.1", dead) in client.known  # a MOVED target is kept
    assert sleeps == [0.01]
    assert follower.seen == ["GET", "GET"]  # before and after the dead leader


def test_a_node_that_stops_answering_is_passed_over_by_the_next_calls(servers):
    """A frozen leader keeps its port open while its peers elect another: a
    call whose reply timed out answers 503, and the calls after it ask the
    other nodes instead of waiting out the timeout on it again."""
    hung = servers([HANG] * 3)
    follower = servers([b"$2\r\nok\r\n"] * 2)
    sleeps: list[float] = []
    client = seeds_client([hung.port, follower.port], sleeps, socket_timeout_s=0.3)
    with pytest.raises(StorageError):
        get(client)
    assert get(client) == b"ok"
    assert get(client) == b"ok"
    assert hung.seen == ["GET"]


def test_a_node_accepting_connections_but_not_answering_costs_the_connect_timeout(
    servers,
):
    """A frozen process's port still accepts connections (the kernel does):
    its silence during the handshake is a failed connection attempt after
    ``connect_timeout_s``, not a wait of the whole socket timeout, which
    would leave the call no time for anything else."""
    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen(8)  # never accepted, never answered
    busy = servers([b"-TRYAGAIN\r\n", b"$2\r\nok\r\n"])
    sleeps: list[float] = []
    client = seeds_client(
        [frozen.getsockname()[1], busy.port],
        sleeps,
        socket_timeout_s=2.0,
        connect_timeout_s=0.1,
    )
    try:
        assert get(client) == b"ok"
    finally:
        frozen.close()
    assert busy.seen == ["GET", "GET"]


@pytest.mark.parametrize(
    "reply",
    [
        b"-ERR not leader\r\n",
        b"-ERR leader transfer is in progress\r\n",
        b"-ERR try again\r\n",
        b"-ERR cluster down\r\n",
        b"-CLUSTERDOWN No raft leader\r\n",
        b"-TRYAGAIN\r\n",
        b"-LOADING Raft module is loading data\r\n",
        b"-NOCLUSTER No Raft Cluster (joining now)\r\n",
        b"-READONLY You can't write against a read only replica.\r\n",
    ],
)
def test_transient_replies_ask_the_next_node_after_a_backoff(servers, reply):
    stuck = servers([reply] * 10)
    other = servers([b"$5\r\nother\r\n"])
    sleeps: list[float] = []
    client = seeds_client([stuck.port, other.port], sleeps)
    assert get(client) == b"other"
    assert sleeps == [0.01]
    assert stuck.seen == ["GET"]


BUSY = (
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL "
    b"or SHUTDOWN NOSAVE.\r\n"
)


def test_a_server_busy_running_a_script_is_waited_for_then_503(servers):
    """-BUSY: another client's script ran past busy-reply-threshold and the
    command was refused, not run: retried after a backoff, as any transient
    reply, and 503 once the budget is spent (never a 500)."""
    server = servers([BUSY, BUSY, b"$2\r\nok\r\n"])
    sleeps: list[float] = []
    client = client_for(server, sleeps)
    script = client.redis.register_script("return 1")
    assert get(client) == b"ok"
    assert sleeps == [0.01, 0.02]
    server.replies = [BUSY] * 10
    with pytest.raises(StorageError, match="storage unavailable after 5 retries"):
        client.call(lambda r: script(keys=[], args=[], client=r), replayable=False)


@pytest.mark.parametrize("reply", [b"-ERR not leader\r\n", b"-TRYAGAIN\r\n"])
def test_transient_replies_within_a_pipeline_are_retried_too(servers, reply):
    # redis-py puts "Command # 1 (...) of pipeline caused error:" before them.
    stuck = servers([reply] * 10)
    other = servers([b"$5\r\nother\r\n"])
    client = seeds_client([stuck.port, other.port], [])
    pipelined = client.call(lambda r: r.pipeline(transaction=False).get("k").execute())
    assert pipelined == [b"other"]


def test_a_raft_timeout_is_retried_when_the_call_may_run_twice(servers):
    """-TIMEOUT: no majority answered in time; a read was not served."""
    server = servers(
        [b"-TIMEOUT no quorum for read\r\n", b"$2\r\nok\r\n"] * 2 + [b":1\r\n"]
    )
    sleeps: list[float] = []
    client = client_for(server, sleeps)
    assert get(client) == b"ok"
    pipelined = client.call(lambda r: r.pipeline(transaction=False).get("k").execute())
    assert pipelined == [b"ok"]
    assert sleeps == [0.01, 0.01]


def test_a_write_that_timed_out_in_raft_is_not_sent_again(servers):
    """A write may still be committed after -TIMEOUT: 503 saying so."""
    server = servers([b"-TIMEOUT\r\n", b":1\r\n"])
    client = client_for(server, [])
    script = client.redis.register_script("return 1")
    with pytest.raises(StorageUncertain, match="may have been applied"):
        client.call(lambda r: script(keys=[], args=[], client=r), replayable=False)
    assert server.seen == ["EVALSHA"]


def test_other_errors_are_not_retried(servers):
    server = servers([b"-ERR user_script:1: boom\r\n"])
    sleeps: list[float] = []
    with pytest.raises(redis.ResponseError, match="boom"):
        get(client_for(server, sleeps))
    assert sleeps == []


def test_a_write_whose_link_died_after_it_was_sent_is_not_sent_again(servers):
    """It may have run: sending it again could apply it twice."""
    server = servers([None, b":1\r\n"])
    sleeps: list[float] = []
    client = client_for(server, sleeps)
    script = client.redis.register_script("return 1")
    with pytest.raises(StorageUncertain, match="may have been applied"):
        client.call(lambda r: script(keys=[], args=[], client=r), replayable=False)
    assert server.seen == ["EVALSHA"]
    assert sleeps == []
    # A replayable call is sent again.
    server.replies = [None, b":2\r\n"]
    assert client.call(lambda r: script(keys=[], args=[], client=r)) == 2
    assert server.seen == ["EVALSHA"] * 3


def test_a_write_refused_before_it_left_is_sent_again(servers):
    """A refused connection means nothing was sent, whatever the call."""
    alive = servers([b":5\r\n"])
    sleeps: list[float] = []
    client = seeds_client([dead_port(), alive.port], sleeps)
    script = client.redis.register_script("return 5")
    call = lambda r: script(keys=[], args=[], client=r)  # noqa: E731
    assert client.call(call, replayable=False) == 5


def test_no_free_pooled_connection_is_not_retried(servers):
    server = servers([])
    sleeps: list[float] = []
    client = RetryingClient(
        server.url, pool_size=1, socket_timeout_s=0.2, sleep=sleeps.append
    )
    held = client.redis.connection_pool.get_connection()
    try:
        with pytest.raises(StorageError, match=r"no storage connection came free"):
            get(client)
    finally:
        client.redis.connection_pool.release(held)
    assert sleeps == []


def test_no_retry_starts_once_the_socket_timeout_has_passed(servers):
    server = servers([b"-CLUSTERDOWN down\r\n"] * 50)
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    client = RetryingClient(
        server.url,
        attempts=50,
        backoff_s=0.01,
        backoff_max_s=0.03,
        socket_timeout_s=0.05,
        sleep=sleep,
        clock=lambda: now[0],
    )
    with pytest.raises(StorageError):
        get(client)
    assert sleeps == [0.01, 0.02, 0.03]


def test_moving_on_closes_the_old_nodes_idle_connections(servers):
    leader = servers([b"$1\r\nx\r\n"])
    follower = servers([f"-MOVED 1 127.0.0.1:{leader.port}\r\n".encode()])
    client = client_for(follower, [])
    old = client.redis.connection_pool
    assert get(client) == b"x"
    assert old.retired
    assert old._available_connections
    assert all(c._sock is None for c in old._available_connections)


# -- seeds ----------------------------------------------------------------------


def test_seed_lists_share_user_password_database_and_options():
    seeds, options, tcp, _ = parse_seeds(
        "redis://narad:p%40ss@h1:7001, h2:7002,[::1]:7003/2?socket_keepalive=true"
    )
    assert seeds == [Address("h1", 7001), Address("h2", 7002), Address("::1", 7003)]
    assert options == {
        "username": "narad",
        "password": "p@ss",
        "db": 2,
        "socket_keepalive": True,
    }
    assert str(seeds[2]) == "[::1]:7003"
    assert tcp.__mro__[2] is redis.Connection


def test_single_urls_keep_working():
    assert parse_seeds("redis://h1")[0] == [Address("h1", 6379)]
    seeds, options, _, unix = parse_seeds("unix://narad@/run/narad/valkey.sock")
    assert seeds == [Address("/run/narad/valkey.sock")]
    assert options["username"] == "narad"
    assert unix.__mro__[2] is redis.UnixDomainSocketConnection
    _, options, tls, _ = parse_seeds("rediss://h1:1,h2:2/0?ssl_cert_reqs=none")
    assert tls.__mro__[2] is redis.SSLConnection
    assert options["ssl_cert_reqs"] == "none"


def test_an_empty_node_in_the_list_is_refused():
    with pytest.raises(InvalidConfiguration, match=r"`storage\.url` has an empty"):
        parse_seeds("redis://h1:1,,h2:2/0")
    with pytest.raises(InvalidConfiguration, match=r"`storage\.url`: Port"):
        parse_seeds("redis://h1:1,h2:two/0")


# -- readiness ------------------------------------------------------------------

RAFT_INFO = """# raft_general
raft_node_id:{me}
raft_state:up
raft_role:{role}
raft_leader_id:{leader}
raft_node1:id=7,state=connected,voting=yes,addr=127.0.0.1,port={port},last_conn_secs=0
"""


def test_a_server_without_raft_is_ready_when_it_answers(servers):
    server = servers([], info="# Server\nredis_version:8.0.0\n")
    assert RetryingClient(server.url).leader_answers()
    assert not RetryingClient(f"redis://127.0.0.1:{dead_port()}/0").leader_answers()


def test_a_raft_follower_is_ready_only_while_the_leader_it_names_answers(servers):
    leader = servers([])
    leader.info = RAFT_INFO.format(me=7, role="leader", leader=7, port=1)
    follower = servers([])
    follower.info = RAFT_INFO.format(me=8, role="follower", leader=7, port=leader.port)
    client = RetryingClient(follower.url)
    assert client.leader_answers()
    assert Address("127.0.0.1", leader.port) in client.known  # learned from INFO
    leader.close()
    assert not client.leader_answers()
    follower.info = RAFT_INFO.format(me=8, role="candidate", leader=-1, port=1)
    assert not client.leader_answers()


def test_a_pooled_link_found_dead_before_sending_is_replaced_at_once(servers):
    """redis-py's health-check PING or a failed send: nothing left, the node
    itself may be fine, so a fresh connection to it is tried without waiting
    and without passing the node over."""
    server = servers([])
    sleeps: list[float] = []
    client = client_for(server, sleeps)
    tries = []

    def fn(r):
        tries.append(r)
        if len(tries) == 1:
            raise redis.ConnectionError("Error 32 while writing to socket")
        return "ok"

    assert client.call(fn, replayable=False) == "ok"
    assert sleeps == []
    assert not client._is_down(client.address)
