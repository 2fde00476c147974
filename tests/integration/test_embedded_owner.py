"""One node owns a data directory: a second one refuses it, a dead one frees it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import pytest

from tests.integration.test_node import valkey_pids_under
from tests.integration.test_node import wait_until
from tests.nodes import Node

pytestmark = pytest.mark.slow


def produce(node: Node, topic: str, bodies: list[str]) -> None:
    http = node.client()
    for body in bodies:
        assert http.post(f"/v1/topics/{topic}/produce", body).status == 202
    http.close()


def replay(node: Node, topic: str) -> list[str]:
    """Every message of a one-partition topic, in order, read-only."""
    http = node.client()
    found = []
    while True:
        query = f"partition=0&offset={len(found)}"
        resp = http.get(f"/v1/topics/{topic}/consume?{query}")
        if resp.status != 200:
            break
        found.append(resp.json()["payload"])
    http.close()
    return found


def test_a_second_node_refuses_the_directory_and_the_first_keeps_its_data(tmp_path):
    first = Node(tmp_path, workers=2).start()
    data = tmp_path / "data"
    try:
        http = first.client()
        assert http.post("/v1/topics", {"name": "t", "partitions": 1}).status == 201
        http.close()
        produce(first, "t", ["a", "b"])
        server = valkey_pids_under(data)
        # A worker that dies closes its copy of the lock: the master keeps it.
        assert wait_until(lambda: len(first.worker_pids()) == 2)
        [worker, _] = first.worker_pids()
        os.kill(worker, signal.SIGKILL)
        assert wait_until(
            lambda: len(first.worker_pids()) == 2 and worker not in first.worker_pids()
        )

        second = Node(tmp_path, workers=1)
        with pytest.raises(RuntimeError, match="node exited"):
            second.start(timeout=20)
        assert second.process.returncode == 2
        log = second.log.read_text()
        assert f"data directory {data} is in use by another node" in log
        assert f"(pid {first.process.pid})" in log

        # The first node and its server carry on, untouched.
        assert valkey_pids_under(data) == server
        produce(first, "t", ["c"])
        assert replay(first, "t") == ["a", "b", "c"]
    finally:
        first.stop()
    assert first.process.returncode == 0

    # Killed outright, master, workers and server at once: the kernel frees
    # the lock and the next node starts at once, with every acknowledged write.
    again = Node(tmp_path, workers=1).start()
    produce(again, "t", ["d"])
    os.killpg(again.process.pid, signal.SIGKILL)
    again.process.wait()
    third = Node(tmp_path, workers=1).start()
    try:
        assert replay(third, "t") == ["a", "b", "c", "d"]
    finally:
        third.stop()


def test_a_node_whose_master_was_killed_waits_for_its_leftovers(tmp_path):
    """kill -9 of the master alone: its workers and server hold the lock until
    they exit; the next node waits for them instead of refusing, then starts
    with the data."""
    first = Node(tmp_path, workers=2).start()
    data = tmp_path / "data"
    http = first.client()
    assert http.post("/v1/topics", {"name": "t", "partitions": 1}).status == 201
    http.close()
    produce(first, "t", ["kept"])
    straggler, *_ = first.worker_pids()
    os.kill(straggler, signal.SIGSTOP)  # a leftover that cannot exit yet
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()

    second = Node(tmp_path, workers=1)
    starting = threading.Thread(target=second.start)
    starting.start()
    try:
        assert wait_until(
            lambda: second.log.exists() and "waiting up to" in second.log.read_text()
        )
        assert f"locked by what pid {first.process.pid} left" in second.log.read_text()
        os.kill(straggler, signal.SIGKILL)
        starting.join(60)
        assert len(valkey_pids_under(data)) == 1
        assert replay(second, "t") == ["kept"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(straggler, signal.SIGKILL)
        second.stop()
    assert wait_until(lambda: not valkey_pids_under(data))


def test_a_deleted_lock_file_does_not_let_a_second_node_in(tmp_path):
    """The directory is what is locked: removing ``narad.lock`` (a "stale
    lock" clean-up) while the node runs does not let a second node start a
    second server on the same files."""
    first = Node(tmp_path, workers=1).start()
    data = tmp_path / "data"
    second = Node(tmp_path, workers=1)
    try:
        (data / "narad.lock").unlink()
        with pytest.raises(RuntimeError, match="node exited"):
            second.start(timeout=20)
        assert second.process.returncode == 2
        log = second.log.read_text()
        assert f"data directory {data} is in use by another node" in log
        assert len(valkey_pids_under(data)) == 1
    finally:
        second.stop()
        first.stop()
