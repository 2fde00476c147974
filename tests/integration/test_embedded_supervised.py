"""The node keeps its embedded Valkey up: restarted on the same data after a
crash, and the node stops (non-zero, for systemd) if it cannot come back."""

from __future__ import annotations

import os
import signal

import pytest

from tests.httpclient import Client
from tests.integration.test_durability import Load
from tests.integration.test_durability import assert_wakes_promptly
from tests.integration.test_durability import drain_and_check
from tests.integration.test_durability import make
from tests.integration.test_durability import wait_for_progress
from tests.integration.test_embedded_owner import produce
from tests.integration.test_embedded_owner import replay
from tests.integration.test_node import valkey_pids_under
from tests.integration.test_node import wait_until
from tests.nodes import Node

pytestmark = pytest.mark.slow


def test_kill_9_of_the_embedded_server_under_load_loses_nothing(tmp_path, topic):
    node = Node(
        tmp_path,
        workers=2,
        # No retry through the outage: a retried ack that the dead server had
        # applied would answer 410 and the ledger could not account for it.
        env={"NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS": "0"},
    ).start()
    data = tmp_path / "data"
    try:
        visibility = 1000
        http = node.client()
        make(http, topic, partitions=3, visibility_timeout_ms=visibility)
        assert wait_until(lambda: len(node.worker_pids()) == 2)
        workers = node.worker_pids()
        probe = Client(node.base, timeout=10)
        with Load(node, topic) as load:
            wait_for_progress(load, 100)
            [server] = valkey_pids_under(data)
            os.kill(server, signal.SIGKILL)
            # Back by itself: same node, same workers, a new server.
            assert wait_until(lambda: valkey_pids_under(data) not in ([], [server]))
            assert wait_until(lambda: probe.get("/readyz").status == 200, 20)
            wait_for_progress(load, load.accepted() + 150, timeout=30)
        drain_and_check(node, topic, load.ledger, visibility)
        assert node.process.poll() is None
        assert node.worker_pids() == workers
        # The workers' notification streams came back with it.
        assert_wakes_promptly(node, http, topic)
        http.close()
        probe.close()
    finally:
        node.stop()
    assert node.process.returncode == 0
    log = node.log.read_text()
    # Each change of state is logged once, not once per retry.
    # (Its status may have gone to gunicorn's reaper of unknown children.)
    assert (
        log.count("embedded Valkey was killed by SIGKILL")
        + log.count("embedded Valkey exited (its status went to gunicorn's reaper)")
        == 1
    )
    assert log.count("restarting embedded Valkey") == 1
    assert log.count("embedded Valkey is back") == 1
    assert log.count("storage notifications lost") <= len(workers)
    assert log.count("storage notifications lost") == log.count(
        "storage notifications are back"
    )


def test_a_server_that_cannot_come_back_stops_the_node_non_zero(tmp_path):
    node = Node(tmp_path, workers=1).start()
    data = tmp_path / "data"
    # A broken append-only manifest: every restart fails at load.
    (data / "appendonlydir" / "appendonly.aof.manifest").write_text("garbage\n")
    [server] = valkey_pids_under(data)
    os.kill(server, signal.SIGKILL)
    node.process.wait(60)
    assert node.process.returncode == 1
    log = node.log.read_text()
    assert "Invalid AOF manifest file format" in log
    assert "embedded Valkey failed 5 times within 60 s; stopping the node" in log
    assert log.count("embedded Valkey did not come back") == 4
    assert not valkey_pids_under(data)


def test_a_torn_append_only_tail_is_dropped_and_the_node_says_so(tmp_path):
    """A crash mid-write leaves a torn end in the append-only file: the node
    starts without it (aof-load-truncated), and its own log says so."""
    first = Node(tmp_path, workers=1).start()
    http = first.client()
    assert http.post("/v1/topics", {"name": "t", "partitions": 1}).status == 201
    http.close()
    produce(first, "t", ["a", "b", "c"])
    first.stop()
    # The last append's transaction, cut before its EXEC.
    [incr] = (tmp_path / "data" / "appendonlydir").glob("*.incr.aof")
    exec_ = b"*1\r\n$4\r\nEXEC\r\n"
    written = incr.read_bytes()
    assert written.endswith(exec_)
    incr.write_bytes(written[: -len(exec_)])
    second = Node(tmp_path, workers=1).start()
    try:
        assert replay(second, "t") == ["a", "b"]
        produce(second, "t", ["d"])
        assert replay(second, "t") == ["a", "b", "d"]
    finally:
        second.stop()
    log = second.log.read_text()
    assert log.count("embedded Valkey dropped the incomplete end of its") == 1
    assert "Revert incomplete MULTI/EXEC transaction in AOF file" in log
    assert "Truncating the AOF appendonly.aof.1.incr.aof at offset" in log
    # A clean start says nothing of the kind.
    assert "dropped the incomplete end" not in first.log.read_text()
