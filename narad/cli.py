"""The ``narad`` command."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import asdict

from narad import __version__
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.errors import PluginError
from narad.errors import StorageError
from narad.plugins import Plugins
from narad.plugins import load_plugins

log = logging.getLogger("narad")


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
    listing = commands.add_parser(
        "plugins", help="list the plugins a node loads and what each claims"
    )
    listing.add_argument("--config", help="TOML file (default: $NARAD_CONFIG)")
    listing.add_argument("--json", action="store_true", help="one JSON document")
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
        if args.command == "serve":
            return serve_forever(config)
        plugins = load_plugins(config)
        config = plugins.configure(config)
        if args.command == "config":
            print_config(config)
        else:
            print_plugins(plugins, as_json=args.json)
        return 0
    except (InvalidConfiguration, PluginError, StorageError) as exc:
        print(f"narad: {exc}", file=sys.stderr)
        return 2


def print_config(config: Config) -> None:
    """The resolved settings as TOML, each with its one-line description."""
    sections: dict[str, list[str]] = {}
    for setting in config.settings:
        value = config.get(setting.key)
        text = json.dumps(list(value) if isinstance(value, tuple) else value)
        line = f"{setting.name} = {text}  # {setting.doc}"
        sections.setdefault(setting.section, []).append(line)
    print(
        "\n\n".join(
            f"[{name}]\n" + "\n".join(lines) for name, lines in sections.items()
        )
    )


def print_plugins(plugins: Plugins, *, as_json: bool) -> None:
    infos = plugins.describe()
    if as_json:
        print(json.dumps({"plugins": [asdict(info) for info in infos]}, indent=2))
        return
    for info in infos:
        print(info.describe())


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
    # Before any plugin is imported: prometheus-client picks its multiprocess
    # mode when first imported, and plugins import narad.metrics.
    metrics_dir = tempfile.mkdtemp(prefix="narad-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        # Built once here, so a bad plugin or setting stops start-up at once.
        plugins = load_plugins(config)
        config = plugins.configure(config)
        for info in plugins.describe():
            log.info("plugin %s", info.describe())
        if not config.storage_url:
            lock = DataDirLock.acquire(config.data_dir)
            embedded = EmbeddedValkey(
                config.data_dir, max_memory=config.get("storage.max_memory"), lock=lock
            )
            try:
                url = embedded.start()
            except BaseException:
                embedded.stop()
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
        from narad.server import NaradApplication
        from narad.server import prepare_environment

        prepare_environment(config, metrics_dir)
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


if __name__ == "__main__":
    sys.exit(main())
