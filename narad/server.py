"""Running the app under gunicorn with Narad's settings.

``narad serve`` and ``conf/gunicorn.conf.py`` both take their settings from
:func:`gunicorn_settings`, so the CLI and a hand-run gunicorn behave alike.
"""

from __future__ import annotations

import os
import resource
from typing import Any

from gunicorn.app.base import BaseApplication

from narad.config import Config


def raise_open_files_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit; return it.

    Every client connection is a descriptor, and the default soft limit (often
    1024) is far below ``server.max_connections``. Workers inherit the limit.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def child_exit(server: Any, worker: Any) -> None:
    from narad.metrics import mark_process_dead

    mark_process_dead(worker.pid)


def gunicorn_settings(config: Config) -> dict[str, Any]:
    def on_starting(server: Any) -> None:
        raise_open_files_limit()
        # Imported here: metrics must not load before the CLI has set
        # PROMETHEUS_MULTIPROC_DIR.
        from narad.guard import check_at_start
        from narad.security.seed import prepare_at_start

        check_at_start(config)
        prepare_at_start(config)

    return {
        "bind": [config.get("server.bind")],
        "workers": config.get("server.workers"),
        # gevent: a long-polling consumer holds a greenlet, not a thread.
        "worker_class": "narad.workers.NaradWorker",
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
