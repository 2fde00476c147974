"""The ``fakeredis`` storage backend, for fast unit tests only.

``fakeredis://<name>`` gives an in-process server shared by every client of
the same name (Lua runs on lupa). Nothing is persisted and nothing crosses a
process: never configure it for a real node.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from narad import hookimpl
from narad.config import Config
from narad_redis import RedisStorage
from narad_redis import RetryingClient

_servers: dict[str, object] = {}


def connect(url: str, config: Config) -> RedisStorage:
    import fakeredis  # a test-only dependency: imported only when used

    name = urlsplit(url).netloc or "default"
    server = _servers.setdefault(name, fakeredis.FakeServer())
    client = fakeredis.FakeRedis(server=server)
    return RedisStorage(RetryingClient(url, client=client, attempts=0))


@hookimpl
def narad_storage_backends():
    return {"fakeredis": connect}
