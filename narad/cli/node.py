"""``narad serve``, ``narad config``, ``narad plugins``: a node on this machine."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import asdict

import click

from narad import logs
from narad.cli.base import Usage
from narad.cli.base import cli
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.errors import PluginError
from narad.errors import StorageError
from narad.plugins import Plugins
from narad.plugins import connect_storage
from narad.plugins import load_plugins

log = logging.getLogger("narad")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="TOML file (default: $NARAD_CONFIG).",
)


def _load(config_path: str | None, **overrides: object) -> Config:
    try:
        return Config.load(
            config_path,
            # Options not given are None; --workers 0 is given, and refused.
            overrides={k: v for k, v in overrides.items() if v is not None},
        )
    except InvalidConfiguration as exc:
        raise Usage(str(exc)) from exc


def _plugins(config: Config) -> tuple[Plugins, Config]:
    try:
        plugins = load_plugins(config)
        return plugins, plugins.configure(config)
    except (InvalidConfiguration, PluginError) as exc:
        raise Usage(str(exc)) from exc


@cli.command()
@config_option
@click.option("--bind", help="HOST:PORT (server.bind).")
@click.option("--workers", type=int, help="Worker processes (server.workers).")
@click.pass_context
def serve(
    ctx: click.Context, config_path: str | None, bind: str | None, workers: int | None
) -> int:
    """Run a node (gunicorn workers; the embedded Valkey unless storage.url)."""
    config = _load(config_path, **{"server.bind": bind, "server.workers": workers})
    logs.configure(config)
    try:
        status = serve_forever(config)
    except (InvalidConfiguration, PluginError, StorageError) as exc:
        raise Usage(str(exc)) from exc
    ctx.exit(status)
    return status


@cli.command("config")
@config_option
def show_config(config_path: str | None) -> None:
    """Print the resolved settings (TOML, each with its description)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    _, config = _plugins(_load(config_path))
    print_config(config)


@cli.command("plugins")
@config_option
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
def list_plugins(config_path: str | None, as_json: bool) -> None:
    """List the plugins a node loads and what each claims."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    plugins, _ = _plugins(_load(config_path))
    print_plugins(plugins, as_json=as_json)


@cli.group("storage")
def storage_group() -> None:
    """Maintain the storage a node uses (storage.url)."""


@storage_group.command("repair")
@config_option
def repair_storage(config_path: str | None) -> None:
    """Recount what a crash between two steps can leave over (a sharded
    cluster: the topic index and the schema byte budget); prints what changed."""
    plugins, config = _plugins(_load(config_path))
    try:
        storage = connect_storage(config, plugins)
    except (InvalidConfiguration, StorageError) as exc:
        raise Usage(str(exc)) from exc
    try:
        repair = getattr(storage, "repair", None)
        # A single server or RedisRaft runs each write in one step: nothing
        # to recount there.
        print(json.dumps(repair() if repair is not None else {}))
    finally:
        storage.close()


# A password in a URL (``redis://user:secret@host``, ``?password=secret``).
_URL_PASSWORD = re.compile(
    r"(?P<keep>://[^/@:]*:)[^/@]*@|(?P<query>[?&]password=)[^&]*"
)


def _hide_password(value: object) -> object:
    if not isinstance(value, str):
        return value
    return _URL_PASSWORD.sub(
        lambda m: f"{m['keep']}***@" if m["keep"] else f"{m['query']}***", value
    )


def print_config(config: Config) -> None:
    """The resolved settings as TOML, each with its one-line description; a
    password in a URL shows as ``***`` (the output gets pasted into tickets)."""
    sections: dict[str, list[str]] = {}
    for setting in config.settings:
        value = _hide_password(config.get(setting.key))
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
    from narad.serve.embedded import DataDirLock
    from narad.serve.embedded import EmbeddedValkey
    from narad.serve.supervisor import Supervisor

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
            if not config.get("storage.data_dir").strip():
                # It would be the working directory, which the server takes
                # over (mode 0700, every file in it made 0600).
                raise InvalidConfiguration(
                    "`storage.data_dir` is empty: the embedded storage needs a "
                    "directory of its own (or set `storage.url`)"
                )
            lock = DataDirLock.acquire(config.data_dir)
            embedded = EmbeddedValkey(
                config.data_dir, max_memory=config.get("storage.max_memory"), lock=lock
            )
            try:
                url = embedded.start()
            except BaseException:
                embedded.stop()
                raise
            log.info(
                "embedded Valkey on %s (data in %s, maxmemory %d MiB)",
                url,
                embedded.data_dir,
                embedded.max_memory >> 20,
            )
            config = config.replace(storage__url=url)
            supervisor = Supervisor(embedded)
            supervisor.start()
        from narad.serve.server import NaradApplication
        from narad.serve.server import prepare_environment

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
