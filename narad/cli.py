"""The ``narad`` command."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile

from narad import __version__
from narad.config import SETTINGS
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.errors import PluginError
from narad.errors import StorageError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="narad", description=__doc__)
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a node (gunicorn workers)")
    serve.add_argument("--config", help="TOML file (default: $NARAD_CONFIG)")
    serve.add_argument("--bind", help="HOST:PORT (server.bind)")
    serve.add_argument("--workers", type=int, help="worker processes (server.workers)")
    show = commands.add_parser("config", help="print the resolved settings")
    show.add_argument("--config", help="TOML file (default: $NARAD_CONFIG)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        overrides = {}
        if getattr(args, "bind", None):
            overrides["server.bind"] = args.bind
        if getattr(args, "workers", None):
            overrides["server.workers"] = args.workers
        config = Config.load(args.config, overrides=overrides)
        if args.command == "config":
            for setting in SETTINGS:
                print(f"{setting.key} = {config.get(setting.key)!r}")
            return 0
        return serve_forever(config)
    except (InvalidConfiguration, PluginError, StorageError) as exc:
        print(f"narad: {exc}", file=sys.stderr)
        return 2


def serve_forever(config: Config) -> int:
    """Run a node until it is stopped; its exit status.

    With no ``storage.url``, the node locks its data directory, starts the
    embedded Valkey and supervises it: 1 if the server could not be kept up.
    """
    from narad.embedded import DataDirLock
    from narad.embedded import EmbeddedValkey
    from narad.supervisor import Supervisor

    owner = os.getpid()
    lock = supervisor = None
    if not config.storage_url:
        lock = DataDirLock.acquire(config.data_dir)
        embedded = EmbeddedValkey(
            config.data_dir, max_memory=config.get("storage.max_memory"), lock=lock
        )
        try:
            url = embedded.start()
        except BaseException:
            embedded.stop()
            lock.close()
            raise
        logging.info(
            "embedded Valkey on %s (data in %s, maxmemory %d MiB)",
            url,
            embedded.data_dir,
            embedded.max_memory >> 20,
        )
        config = config.replace(storage__url=url)
        supervisor = Supervisor(embedded)
        supervisor.start()
    metrics_dir = tempfile.mkdtemp(prefix="narad-metrics-")
    try:
        from narad.server import NaradApplication
        from narad.server import prepare_environment

        prepare_environment(config, metrics_dir)
        _check_app(config)
        NaradApplication(config).run()
    except SystemExit:
        # gunicorn's master ends with sys.exit; so do its workers, which are
        # forks of this process and unwind this same stack.
        if os.getpid() != owner or supervisor is None or not supervisor.gave_up:
            raise
        return 1
    finally:
        # Only the master cleans up.
        if os.getpid() == owner:
            shutil.rmtree(metrics_dir, ignore_errors=True)
            if supervisor is not None:
                supervisor.stop()
            if lock is not None:
                lock.close()
    return 0


def _check_app(config: Config) -> None:
    """Build the app once in the master so a bad plugin stops start-up here."""
    from narad.plugins import load_plugins

    load_plugins(config)


if __name__ == "__main__":
    sys.exit(main())
