"""Running the app under gunicorn with Narad's settings.

``narad serve`` and ``conf/gunicorn.conf.py`` both take their settings from
:func:`gunicorn_settings`, so the CLI and a hand-run gunicorn behave alike.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from gunicorn.app.base import BaseApplication

from narad.config import Config

# Validating a payload recurses once per nesting level (at most 256) times the
# schema's in-place steps; request threads get room for the deepest case the
# validator admits instead of the platform's default stack.
THREAD_STACK_BYTES = 64 * 1024 * 1024


def post_fork(server: Any, worker: Any) -> None:
    threading.stack_size(THREAD_STACK_BYTES)


def child_exit(server: Any, worker: Any) -> None:
    from narad.metrics import mark_process_dead

    mark_process_dead(worker.pid)


def gunicorn_settings(config: Config) -> dict[str, Any]:
    def on_starting(server: Any) -> None:
        # Imported here: metrics must not load before the CLI has set
        # PROMETHEUS_MULTIPROC_DIR.
        from narad.guard import check_at_start

        check_at_start(config)

    return {
        "bind": [config.get("server.bind")],
        "workers": config.get("server.workers"),
        # gthread: a long-polling consumer holds a thread, not a process.
        "worker_class": "gthread",
        "threads": config.get("server.threads"),
        "keepalive": config.get("server.keepalive"),
        # Each worker gets its own listening socket and the kernel spreads
        # connections across them; with one shared socket, keep-alive
        # connections can all pile onto one worker.
        "reuse_port": True,
        # gunicorn 27's control socket defaults to $HOME/.gunicorn, where
        # several nodes on one machine would collide.
        "control_socket_disable": True,
        "timeout": 60,
        "graceful_timeout": 20,
        # In the master, before any worker: a storage that is not durable
        # stops the node here (see narad.guard).
        "on_starting": on_starting,
        "post_fork": post_fork,
        "child_exit": child_exit,
        "accesslog": None,
        "proc_name": "narad",
    }


class NaradApplication(BaseApplication):
    def __init__(self, config: Config) -> None:
        self.config = config
        super().__init__()

    def load_config(self) -> None:
        for key, value in gunicorn_settings(self.config).items():
            self.cfg.set(key, value)

    def load(self):
        from narad.app import get_app

        return get_app()


def prepare_environment(config: Config, metrics_dir: str) -> None:
    """Hand the resolved settings and the metrics directory to the workers."""
    os.environ.update(config.as_env())
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
