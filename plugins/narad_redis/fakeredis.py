"""The ``fakeredis`` storage backend, for fast in-process tests only.

``fakeredis://<name>`` gives an in-process server shared by every client of
the same name (Lua runs on lupa), served by the reference Redis backend.
Nothing is persisted and nothing crosses a process, so it is no entry point
of the shipped distribution: :func:`narad.testing.load_plugins` registers it
by name (plugin ``narad_fakeredis``, module ``narad_redis.fakeredis``), as
the host registers the built-ins, so that the core never imports a plugin.
Needs the test extra (``narad[test]``).
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit

from narad import hookimpl
from narad.config import Config
from narad_redis import RedisStorage
from narad_redis import RetryingClient

NAME = "narad_fakeredis"

_servers: dict[str, object] = {}


def connect(url: str, config: Config) -> RedisStorage:
    import fakeredis  # a test-only dependency: imported only when used

    name = urlsplit(url).netloc or "default"
    server = _servers.setdefault(name, fakeredis.FakeServer())
    client = fakeredis.FakeRedis(server=server, connection_class=_connection_class())
    return RedisStorage(RetryingClient(url, client=client, attempts=0))


@functools.cache
def _connection_class() -> type:
    """fakeredis's connection, whose read of a reply waits at most its
    ``timeout`` (as redis-py's own does: the notification stream reads its
    subscription so); fakeredis's waits for ever."""
    import fakeredis
    import redis

    class Connection(fakeredis.FakeRedisConnection):
        def read_response(self, **kwargs: Any) -> Any:
            timeout = kwargs.get("timeout")
            if timeout is not None and not self.can_read(timeout):
                raise redis.TimeoutError("Timeout reading from socket")
            return super().read_response(**kwargs)

    return Connection


@hookimpl
def narad_storage_backends():
    return {"fakeredis": connect}
