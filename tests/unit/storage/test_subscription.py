"""The notification stream notices a subscription gone silent."""

from __future__ import annotations

import socketserver
import threading

import pytest

import narad_redis
from narad.config import Config
from narad.errors import StorageError
from narad.storage import Event
from narad_redis import storage as redis_storage
from tests.unit.storage.fakeresp import _read_command


class SilentAfterSubscribe(socketserver.StreamRequestHandler):
    """Confirms SUBSCRIBE, then never answers again (a dead host, a partition):
    the connection stays open, so only a PING can tell."""

    def handle(self) -> None:
        subscribed = False
        while (command := _read_command(self.rfile)) is not None:
            name = command[0].upper()
            if name == b"SUBSCRIBE":
                subscribed = True
                for count, channel in enumerate(command[1:], start=1):
                    self.wfile.write(
                        b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:%d\r\n"
                        % (len(channel), channel, count)
                    )
            elif name == b"PING":
                if not subscribed:  # redis-py's health check on a new link
                    self.wfile.write(b"+PONG\r\n")
            else:
                self.wfile.write(b"+OK\r\n")


@pytest.fixture
def silent_server():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), SilentAfterSubscribe)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_subscription_that_stops_answering_ping_is_lost(silent_server, monkeypatch):
    monkeypatch.setattr(redis_storage, "KEEPALIVE_S", 0.0)
    monkeypatch.setattr(redis_storage, "PING_WAIT_S", 0.5)
    url = f"redis://127.0.0.1:{silent_server}/0"
    storage = narad_redis.connect(url, Config.load(env={}))
    stream = storage.notifications()
    assert next(stream).event is Event.LISTENING
    with pytest.raises(StorageError, match="no answer to PING"):
        for note in stream:
            assert note is None
    storage.close()
