"""The Redis backend's connection pool and script runner, on the session's
real storage: a connection comes back clean whatever the last caller left on
it, callers queue for a bounded pool, and a script the server forgot is
loaded again."""

from __future__ import annotations

import threading
import time

import pytest
import redis

import narad
import narad_redis
from narad.config import Config
from narad.errors import StorageError
from narad.storage import Entry
from narad.storage import PayloadKind
from narad.storage import Status
from narad.testing.storage_contract import new_meta
from narad_redis.client import NotEnoughReplicas
from narad_redis.client import RetryingClient
from narad_redis.client import run_script
from narad_redis.client import run_scripts
from tests.nodes import start_valkey
from tests.nodes import tcp_url


@pytest.fixture
def client(storage_url):
    made: list[RetryingClient] = []

    def make(**options) -> RetryingClient:
        made.append(RetryingClient(storage_url, **options))
        return made[-1]

    yield make
    for one in made:
        one.close()


def echo(client: RetryingClient, value: object) -> bytes:
    script = client.redis.register_script("return ARGV[1]")
    return client.call(lambda r: run_script(script, [], [value], r), replayable=False)


def test_a_script_the_server_forgot_is_loaded_again(client):
    one = client()
    assert echo(one, "before") == b"before"
    one.call(lambda r: r.script_flush())
    assert echo(one, "after") == b"after"


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("text", b"text"),
        (b"\x00\xff", b"\x00\xff"),
        (42, b"42"),
        (bytearray(b"array"), b"array"),  # not packed by hiredis: redis-py's way
        (memoryview(b"view"), b"view"),
    ],
)
def test_script_arguments_arrive_as_redis_py_sends_them(client, value, sent):
    assert echo(client(), value) == sent


def test_an_argument_redis_py_refuses_is_refused_before_sending(client):
    one = client()
    with pytest.raises(redis.DataError):
        echo(one, None)
    assert echo(one, "after") == b"after"  # the connection is still in step


def test_a_reply_left_unread_is_not_read_by_the_next_caller(client):
    one = client(pool_size=1)
    one.call(lambda r: r.set("narad-test:pool", "right"))
    pool = one.redis.connection_pool
    cut_short = pool.get_connection()
    cut_short.send_command("ECHO", "stale")  # its reply is never read
    assert cut_short.can_read(timeout=5)  # it has arrived: the check can see it
    pool.release(cut_short)
    assert one.call(lambda r: r.get("narad-test:pool")) == b"right"
    assert echo(one, "fresh") == b"fresh"


def test_a_connection_the_server_closed_while_idle_is_replaced(client):
    one = client(pool_size=1)
    own_id = one.call(lambda r: r.client_id())
    other = one.unpooled()
    try:
        other.client_kill_filter(_id=own_id)
    finally:
        other.connection_pool.disconnect()
    # Not replayable: a link found dead after sending would be StorageUncertain.
    assert echo(one, "again") == b"again"
    assert one.call(lambda r: r.client_id()) != own_id


def test_callers_wait_for_a_connection_to_come_free(client):
    one = client(pool_size=1, socket_timeout_s=5.0)
    pool = one.redis.connection_pool
    held = pool.get_connection()
    threading.Timer(0.2, pool.release, [held]).start()
    started = time.monotonic()
    assert echo(one, "waited") == b"waited"
    assert time.monotonic() - started >= 0.15
    assert pool._created_connections == 1


def test_a_full_pool_answers_no_connection_in_time(client):
    one = client(pool_size=2, socket_timeout_s=0.2)
    pool = one.redis.connection_pool
    held = [pool.get_connection(), pool.get_connection()]
    try:
        with pytest.raises(StorageError, match="no storage connection came free"):
            echo(one, "none")
    finally:
        for connection in held:
            pool.release(connection)
    assert echo(one, "then") == b"then"


def test_connections_name_narad_and_cost_no_metadata_lookup(client, monkeypatch):
    lookups = []
    monkeypatch.setattr(
        redis.utils, "get_lib_version", lambda: lookups.append(1) or "0"
    )
    one = client(pool_size=4)
    held = [one.redis.connection_pool.get_connection() for _ in range(3)]
    try:
        info = one.call(lambda r: r.client_info())
    finally:
        for connection in held:
            one.redis.connection_pool.release(connection)
    assert info["lib-name"] == f"redis-py(narad_v{narad.__version__})"
    assert info["lib-ver"] == redis.__version__
    assert lookups == []  # four connections made: the version was looked up once


WRITE = "redis.call('SET', KEYS[1], ARGV[1]) return 1"
READ = "return redis.call('GET', KEYS[1])"


def reads(r: redis.Redis) -> int:
    return r.info("stats")["total_reads_processed"]


def test_scripts_run_together_go_in_one_read_once_the_node_ran_them(tmp_path):
    server = start_valkey(tmp_path / "valkey")
    one = RetryingClient(tcp_url(server))
    try:
        write, read = (one.redis.register_script(s) for s in (WRITE, READ))
        calls = [(write, ["k"], ["first"]), (read, ["k"], [])]
        # The first time, one by one: each script is loaded as it goes.
        assert one.call(lambda r: run_scripts(calls, r)) == [1, b"first"]
        calls[0] = (write, ["k"], ["second"])
        before = reads(one.redis)
        assert one.call(lambda r: run_scripts(calls, r)) == [1, b"second"]
        # The pair in one read, then INFO's own.
        assert reads(one.redis) - before == 2
    finally:
        one.close()
        server.stop()


def test_a_batch_append_reaches_the_server_in_fewer_reads_than_its_records(
    tmp_path,
):
    """append.lua takes a batch's records in one argument: the server reads
    a large argument in one go, and as many arguments in pieces, one read
    per turn of its event loop (each turn waiting for others' fsync)."""
    server = start_valkey(tmp_path / "valkey")
    storage = narad_redis.connect(tcp_url(server), Config.load(env={}))
    try:
        meta = new_meta()
        assert storage.create_topic(meta).status is Status.OK
        payloads = [b"%04d" % i * 256 for i in range(100)]  # 1 KiB each
        entries = [Entry(0, b"", p, PayloadKind.BINARY) for p in payloads]
        r = storage.client.redis

        def appended() -> int:
            result = storage.append(meta, entries, schema_version=0, now_ms=1000)
            assert result.status is Status.OK
            return result.count

        assert appended() == 100  # the script is loaded: later calls are one each
        before = reads(r)
        assert appended() == 100
        batch = reads(r) - before - 1  # INFO's own
        # The same bytes as many arguments, sent the same way.
        many = r.register_script("return #ARGV")
        before = reads(r)
        assert storage.client.call(lambda c: run_script(many, [], payloads, c)) == 100
        separate = reads(r) - before - 1
        assert batch < separate
    finally:
        storage.close()
        server.stop()


def test_scripts_run_together_after_the_node_forgot_them(tmp_path):
    server = start_valkey(tmp_path / "valkey")
    one = RetryingClient(tcp_url(server))
    try:
        write, echo_ = (one.redis.register_script(s) for s in (WRITE, "return ARGV[1]"))
        calls = [(write, ["k"], ["v1"]), (echo_, [], ["e"])]
        assert one.call(lambda r: run_scripts(calls, r)) == [1, b"e"]
        one.call(lambda r: r.script_flush())
        calls[0] = (write, ["k"], ["v2"])
        assert one.call(lambda r: run_scripts(calls, r)) == [1, b"e"]
        assert one.call(lambda r: r.get("k")) == b"v2"
        calls[0] = (write, ["k"], ["v3"])
        before = reads(one.redis)
        assert one.call(lambda r: run_scripts(calls, r)) == [1, b"e"]
        assert reads(one.redis) - before == 2  # loaded again: together again
    finally:
        one.close()
        server.stop()


def test_scripts_run_together_wait_for_replicas_once(tmp_path):
    # A replica syncs at once (not after diskless sync's 5 s wait for others).
    primary = start_valkey(tmp_path / "primary", extra=("repl-diskless-sync-delay 0",))
    replica = start_valkey(
        tmp_path / "replica", extra=(f"replicaof 127.0.0.1 {primary.port}",)
    )
    # Enough confirmations end a WAIT at once; too few only after its wait.
    clients = [
        RetryingClient(tcp_url(primary), min_replicas=n, replica_wait_ms=wait_ms)
        for n, wait_ms in ((1, 5000), (2, 200))
    ]
    try:
        one, two = clients
        deadline = time.monotonic() + 10
        while (
            one.call(lambda r: r.info("replication")).get("slave0", {}).get("state")
            != "online"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        write, read = (one.redis.register_script(s) for s in (WRITE, READ))
        for value in ("first", "second"):  # one by one, then together
            calls = [(write, ["k"], [value]), (read, ["k"], [])]
            assert one.call(lambda r, c=calls: run_scripts(c, r)) == [1, value.encode()]
        assert redis.Redis.from_url(tcp_url(replica)).get("k") == b"second"
        for _ in range(2):
            with pytest.raises(NotEnoughReplicas, match="1 of the 2 replicas"):
                two.call(lambda r, c=calls: run_scripts(c, r))
        # Every reply was read: the connection is still in step.
        assert two.call(lambda r: r.get("k")) == b"second"
    finally:
        for client in clients:
            client.close()
        replica.stop()
        primary.stop()
