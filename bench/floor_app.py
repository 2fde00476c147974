"""The floor for bench/messaging.py: a bare falcon endpoint, one EVALSHA each.

``POST /floor`` appends the request body to one list with a registered Lua
script, under the gunicorn settings ``narad serve`` uses, against the same
Valkey. What Narad's produce costs beyond this is Narad's own overhead.

Run: ``PYTHONPATH=.:plugins python bench/floor_app.py BIND REDIS_URL WORKERS``.
"""

from __future__ import annotations

import sys

import falcon
import redis
from gunicorn.app.base import BaseApplication

from narad.config import Config
from narad.server import gunicorn_settings

APPEND = "return redis.call('RPUSH', KEYS[1], ARGV[1])"


class Floor:
    def __init__(self, url: str) -> None:
        self.url = url
        self.script = None

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.script is None:  # per worker, after the fork
            client = redis.Redis.from_url(self.url, protocol=2)
            self.script = client.register_script(APPEND)
        self.script(keys=["bench:floor"], args=[req.bounded_stream.read()])
        resp.status = falcon.HTTP_202


class FloorApplication(BaseApplication):
    def __init__(self, bind: str, url: str, workers: int) -> None:
        self.bind, self.url, self.workers = bind, url, workers
        super().__init__()

    def load_config(self) -> None:
        config = Config.load(
            env={},
            overrides={"server.bind": self.bind, "server.workers": self.workers},
        )
        settings = gunicorn_settings(config)
        # Narad's hooks: its metrics and its storage check; nothing to do here.
        settings.pop("child_exit")
        settings.pop("on_starting")
        settings["proc_name"] = "narad-floor"
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> falcon.App:
        app = falcon.App()
        app.add_route("/floor", Floor(self.url))
        return app


if __name__ == "__main__":
    FloorApplication(sys.argv[1], sys.argv[2], int(sys.argv[3])).run()
