"""The supervisor's restart policy, over a stand-in server."""

from __future__ import annotations

import logging
import queue
import threading

import pytest

from narad.errors import StorageError
from narad.serve import supervisor
from narad.serve.supervisor import Supervisor
from narad.serve.supervisor import describe_exit


class StandIn:
    """Exits when told to; each start() succeeds or fails as scripted."""

    data_dir = "/data"

    def __init__(self, starts: list[bool]) -> None:
        self.exits: queue.Queue[int | None] = queue.Queue()
        self.starts = starts
        self.started = 0
        self.stopped = False
        self.process = type("P", (), {"pid": 42})()
        self.running = threading.Event()

    def wait(self) -> int | None:
        return self.exits.get()

    def start(self) -> str:
        self.started += 1
        if not self.starts.pop(0):
            self.exits.put(1)  # it died at once: the next wait() sees that
            raise StorageError("embedded Valkey exited with 1: broken")
        self.running.set()
        return "unix:///s"

    def stop(self) -> None:
        self.stopped = True
        self.exits.put(None)

    def log_tail(self) -> str:
        return "last words"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(supervisor, "FIRST_BACKOFF_S", 0.001)


def test_an_exit_is_followed_by_a_restart_on_the_same_server(caplog):
    server = StandIn([True])
    watch = Supervisor(server, give_up=pytest.fail)
    with caplog.at_level(logging.INFO, logger="narad.serve.supervisor"):
        watch.start()
        server.exits.put(-9)
        assert server.running.wait(5)
        watch.stop()
    assert server.started == 1 and server.stopped and not watch.gave_up
    assert [r.getMessage() for r in caplog.records] == [
        "embedded Valkey was killed by SIGKILL: last words",
        "restarting embedded Valkey on /data in 0.0 s (failure 1; the node stops "
        "at 5 within 60 s)",
        "embedded Valkey is back (pid 42)",
    ]


def test_five_failures_within_the_window_give_up():
    server = StandIn([False, False, False, True])
    gave_up = threading.Event()
    watch = Supervisor(server, give_up=gave_up.set)
    watch.start()
    server.exits.put(1)  # 1: lost; 2-4: failed restarts; 5: lost again
    assert server.running.wait(5)
    server.exits.put(-6)
    assert gave_up.wait(5)
    assert watch.gave_up
    assert server.started == 4
    watch.stop()


def test_failures_older_than_the_window_are_forgotten():
    now = [0.0]
    server = StandIn([True] * 5)
    watch = Supervisor(
        server, give_up=pytest.fail, max_failures=2, window_s=10, clock=lambda: now[0]
    )
    watch.start()
    for _ in range(5):
        server.running.clear()
        server.exits.put(1)
        assert server.running.wait(5)
        now[0] += 11
    watch.stop()
    assert server.started == 5 and not watch.gave_up


def test_exit_descriptions():
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(1) == "exited with status 1"
    assert describe_exit(None) == "exited (its status went to gunicorn's reaper)"
