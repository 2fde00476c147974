"""Running the app under gunicorn with Narad's settings.

``narad serve`` and ``conf/gunicorn.conf.py`` both take their settings from
:func:`gunicorn_settings`, so the CLI and a hand-run gunicorn behave alike:
the same workers, logging (:mod:`narad.logs`) and readiness notice to
systemd.

**Readiness under systemd** (``Type=notify``, ``NotifyAccess=all``): gunicorn
itself says ``READY=1`` as soon as its master has started, before any worker
exists (with ``reuse_port`` each worker opens its own listening socket). The
master therefore takes ``NOTIFY_SOCKET`` out of the environment at start
(gunicorn's notice goes nowhere) and hands it to the workers as
:data:`NOTIFY_ENV`; the first worker that has built the app and listens says
``READY=1``, so ``systemctl start`` returns once the node answers. Outside
systemd there is no socket and nothing is sent.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import resource
import shutil
import signal
import socket
import ssl
import stat
import sys
import tempfile
from typing import Any

from gunicorn import util
from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

from narad import datastack
from narad import logs
from narad.config import CONFIG_ENV
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.errors import PluginError
from narad.errors import StorageError

log = logging.getLogger(__name__)

#: Where the master keeps systemd's notification socket for the workers.
NOTIFY_ENV = "NARAD_NOTIFY_SOCKET"


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


#: What stops a worker: held (blocked) from the fork until the worker has its
#: own handlers for them (:meth:`narad.serve.workers.NaradWorker.init_process`).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGQUIT})


class _StopSignalHold:
    """The stop signals, held in the master across a worker's fork only."""

    def __init__(self) -> None:
        self.held = False
        self.registered = False  # the release, as a hook after each fork

    def hold(self) -> None:
        if not self.registered:
            os.register_at_fork(after_in_parent=self.release)
            self.registered = True
        self.held = True
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)

    def release(self) -> None:
        if self.held:  # not after forks of the master's own (subprocesses)
            self.held = False
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


_STOP_SIGNAL_HOLD = _StopSignalHold()


def pre_fork(server: Any, worker: Any) -> None:
    """In the master, before a worker's fork: hold the stop signals.

    A new worker runs the master's handlers until it sets its own, and a stop
    signal they take is lost there: a worker told to stop as it starts (in a
    reload, a stop right after one) would serve on until the graceful timeout
    had it killed. Held, the signal waits for the worker's own handler. The
    master lets them go again as soon as the fork returns.
    """
    _STOP_SIGNAL_HOLD.hold()


def worker_exit(server: Any, worker: Any) -> None:
    """In the worker, as it ends: write out what it counted."""
    from narad.metrics import TALLY

    TALLY.flush()


def sd_notify(state: str, address: str | None = None) -> bool:
    """Send ``state`` (``READY=1``...) to systemd's notification socket
    (``address``, default ``$NOTIFY_SOCKET``); False when there is none."""
    address = address or os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(address)
            sock.sendall(state.encode())
        except OSError as exc:
            log.warning("cannot notify systemd at %s: %s", address, exc)
            return False
    return True


def take_notify_socket() -> None:
    """In the master, before gunicorn's own (premature) notice: keep the
    socket for the workers (see the module docstring)."""
    address = os.environ.pop("NOTIFY_SOCKET", None)
    if address:
        os.environ[NOTIFY_ENV] = address


def post_worker_init(worker: Any) -> None:
    """In a worker whose app is built and whose socket listens: install the
    frame-stack chunk cache where this Python needs it (:mod:`narad.datastack`),
    then tell systemd the node is ready (the first such worker counts; later
    ones change nothing)."""
    if datastack.install() == "not built":
        worker.log.warning(
            "narad._datastack is not built (no C compiler at install): deep "
            "payloads validate slower on this Python (see narad.datastack)"
        )
    address = os.environ.get(NOTIFY_ENV)
    if address:
        sd_notify(
            f"READY=1\nSTATUS=serving (worker {worker.pid} ready)", address=address
        )


#: gunicorn's line naming the master's listening sockets (``Arbiter.start``).
LISTENING = "Listening at: %s (%s)"


class GunicornLogger(Logger):
    """gunicorn's logger without gunicorn's access log: Narad writes its own
    (:class:`narad.http.middleware.RequestLog`). With ``logconfig_dict`` set,
    gunicorn's would build every request's atoms only to drop the line, a
    noticeable share of a single produce's CPU (bench/messaging.py).

    Its start line names the address served: with ``reuse_port`` the master
    holds no socket (each worker binds its own), and gunicorn names none."""

    access_log_enabled = False

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if msg == LISTENING and args and not args[0]:
            args = (listening_at(self.cfg), *args[1:])
        super().info(msg, *args, **kwargs)

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        """Nothing: see the class doc."""


def listening_at(cfg: Any) -> str:
    """The addresses of ``cfg`` (a ``gunicorn.config.Config``) as gunicorn
    names the sockets it listens on: ``http://127.0.0.1:7942``,
    ``https://[::1]:7942``, ``unix:/run/narad.sock``."""
    scheme = "https" if cfg.is_ssl else "http"
    names = []
    for address in cfg.address:
        if isinstance(address, str):
            names.append(f"unix:{address}")
        elif util.is_ipv6(address[0]):
            names.append(f"{scheme}://[{address[0]}]:{address[1]}")
        else:
            names.append(f"{scheme}://{address[0]}:{address[1]}")
    return ",".join(names)


def refuse_an_address_in_use(address: str) -> None:
    """Stop start-up if another process listens on ``address`` (``server.bind``),
    or if it cannot be listened on at all.

    With ``reuse_port`` each worker binds a socket of its own, and the kernel
    lets it share the port with any process of the same user that did the
    same (another node on the same ``server.bind``): each would then take
    part of the connections. A probe bound without SO_REUSEPORT is refused.
    A unix socket someone answers on is in use too: gunicorn would replace it.

    Raises:
        InvalidConfiguration: the address is in use, or cannot be bound.
    """
    in_use = InvalidConfiguration(
        f"`server.bind` {address} is in use by another process (another node?): "
        "stop it, or give this node another address"
    )
    addr = util.parse_address(address)
    if isinstance(addr, str):
        # gunicorn removes a socket file in its way: only a dead one may go.
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(addr)
            except OSError:
                pass  # nothing listens there
            else:
                raise in_use
        _refuse_an_unbindable_path(address, addr)
        return
    family = socket.AF_INET6 if util.is_ipv6(addr[0]) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # Connections in TIME_WAIT from an earlier run are no conflict.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise in_use from None
            # Each worker would fail the same way, and be restarted forever.
            raise InvalidConfiguration(
                f"`server.bind` {address} cannot be listened on: {exc}"
            ) from None


def _refuse_an_unbindable_path(address: str, path: str) -> None:
    """Bind ``path`` as gunicorn will (a dead socket there removed first),
    then let it go: gunicorn itself retries five times, saying "connection
    failed", and exits 1 or with a traceback."""
    try:
        if not path.startswith("\0") and os.path.lexists(path):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise InvalidConfiguration(
                    f"`server.bind` {address} cannot be listened on: "
                    f"{path} is not a socket"
                )
            os.unlink(path)
        with socket.socket(socket.AF_UNIX) as probe:
            probe.bind(path)
        if not path.startswith("\0"):
            os.unlink(path)
    except OSError as exc:
        raise InvalidConfiguration(
            f"`server.bind` {address} cannot be listened on: {exc}"
        ) from None


def tls_context(config: Config) -> ssl.SSLContext | None:
    """The TLS server context of ``server.tls_cert`` and ``server.tls_key``
    (None: plain HTTP), asking for client certificates signed by
    ``server.tls_client_ca`` when that is set.

    A client certificate is optional in the handshake and verified when one
    is given (a bad one fails the handshake); a connection without one is
    answered on the health probes only (:mod:`narad.serve.workers`), so that a
    load balancer's probes keep working. HTTP/1.1 only, TLS 1.2 at least.
    Built in each worker after gevent's patching (its ``ssl`` then), and
    once in the master at start to check the files.

    Raises:
        InvalidConfiguration: a file is missing or unreadable, or the key
            does not match the certificate.
    """
    cert = config.get("server.tls_cert").strip()
    key = config.get("server.tls_key").strip()
    client_ca = config.get("server.tls_client_ca").strip()
    if not cert and not key:
        if client_ca:
            raise InvalidConfiguration(
                "`server.tls_client_ca` needs `server.tls_cert` and `server.tls_key`"
            )
        return None
    if not cert or not key:
        raise InvalidConfiguration(
            "`server.tls_cert` and `server.tls_key` go together: set both (PEM "
            "files) to serve HTTPS, or neither"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidConfiguration(
            f"`server.tls_cert` {cert} with `server.tls_key` {key} cannot be "
            f"loaded: {exc}"
        ) from None
    if client_ca:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidConfiguration(
                f"`server.tls_client_ca` {client_ca} cannot be loaded: {exc}"
            ) from None
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def check_tls_at_start(config: Config) -> None:
    """In the master at start: the TLS files load (else
    :class:`InvalidConfiguration`), and one warning when security is on and
    the node listens beyond loopback without TLS: its users' passwords
    would cross the network in clear."""
    context = tls_context(config)
    bind = config.get("server.bind")
    if context is None and config.get("security.enabled") and not _local(bind):
        log.warning(
            "security is on but `server.bind` %s is not a loopback address and "
            "TLS is off: passwords (HTTP Basic) and messages cross the network "
            "in clear; set `server.tls_cert` and `server.tls_key`, or bind to "
            "loopback behind a TLS proxy",
            bind,
        )


def _local(bind: str) -> bool:
    """Whether ``server.bind`` is reachable from this machine only (a unix
    socket, or a host whose every address is loopback)."""
    if bind.startswith("unix:"):
        return True
    host = bind.rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(found) and all(
        ipaddress.ip_address(info[4][0].partition("%")[0]).is_loopback for info in found
    )


# The settings of this node's workers: the last that loaded in the master.
# Workers are forks of the master and take them from there rather than read
# the file again, which may have been broken since (see hand_run_settings).
_NODE_CONFIG: list[Config] = []


def node_config() -> Config:
    """The settings a worker builds its app with: those the master runs with,
    else ``NARAD_CONFIG`` and ``NARAD_*`` read now (the app run under another
    server)."""
    return _NODE_CONFIG[-1] if _NODE_CONFIG else Config.load()


def gunicorn_settings(config: Config) -> dict[str, Any]:
    def on_starting(server: Any) -> None:
        refuse_an_address_in_use(config.get("server.bind"))
        take_notify_socket()
        raise_open_files_limit()
        # Imported here: metrics must not load before the CLI has set
        # PROMETHEUS_MULTIPROC_DIR.
        from narad.app import check_capacity_at_start
        from narad.guard import check_at_start
        from narad.plugins import load_plugins
        from narad.security.seed import prepare_at_start

        # The plugins' settings: else each worker fails on them as it boots,
        # and gunicorn stops with a traceback.
        load_plugins(config).configure(config)
        check_capacity_at_start(config)
        check_tls_at_start(config)
        check_at_start(config)
        prepare_at_start(config)

    return {
        "bind": [config.get("server.bind")],
        "workers": config.get("server.workers"),
        # gevent: a long-polling consumer holds a greenlet, not a thread.
        "worker_class": "narad.serve.workers.NaradWorker",
        "keepalive": config.get("server.keepalive"),
        # For the requests narad.serve.plain does not take (all of them with
        # server.plain_requests off).
        "http_parser": config.get("server.http_parser"),
        # Forwarding headers (X-Forwarded-Proto..., SCRIPT_NAME) from these
        # peers only; gunicorn's default trusts 127.0.0.1 and ::1, where any
        # local client would rewrite the routed path.
        "forwarded_allow_ips": ",".join(config.get("server.forwarded_allow_ips")),
        # Each worker gets its own listening socket and the kernel spreads
        # connections across them; with one shared socket, keep-alive
        # connections can all pile onto one worker. Not for a unix socket
        # (no SO_REUSEPORT there; each worker's bind would replace the last
        # one's path): the master's one socket is shared.
        "reuse_port": not config.get("server.bind").startswith("unix:"),
        # gunicorn 27's control socket defaults to $HOME/.gunicorn, where
        # several nodes on one machine would collide.
        "control_socket_disable": True,
        # HTTPS: the worker makes the handshakes itself (narad.serve.workers, with
        # tls_context); gunicorn takes the scheme from these (https in the
        # environ, no sendfile).
        "certfile": config.get("server.tls_cert").strip() or None,
        "keyfile": config.get("server.tls_key").strip() or None,
        "timeout": 60,
        "graceful_timeout": 20,
        # In the master, before any worker: a storage that is not durable
        # stops the node here (see narad.guard).
        "on_starting": on_starting,
        "pre_fork": pre_fork,
        "child_exit": child_exit,
        "worker_exit": worker_exit,
        "post_worker_init": post_worker_init,
        "accesslog": None,
        "logger_class": GunicornLogger,
        "loglevel": config.get("log.level"),
        "logconfig_dict": logs.dict_config(config),
        "proc_name": "narad",
    }


# The metrics directory hand_run_settings made, kept across the config
# file's reloads (SIGHUP), which find PROMETHEUS_MULTIPROC_DIR set.
_MADE_METRICS_DIR: list[str] = []


def hand_run_settings() -> dict[str, Any]:
    """:func:`gunicorn_settings` from ``NARAD_CONFIG`` and ``NARAD_*``, for
    ``conf/gunicorn.conf.py``.

    A setting or storage the node cannot start with ends gunicorn with status
    2 and its message, as ``narad serve`` does: gunicorn would print a
    traceback (not a log line, not JSON) around it. On a reload (SIGHUP:
    ``systemctl reload``) gunicorn runs the file again: settings that do not
    load, the plugins' included, are logged and refused, and the node and its
    new workers keep the settings they had.

    Without ``PROMETHEUS_MULTIPROC_DIR`` the master makes one for this run
    and removes it at exit, as ``narad serve`` does: each worker would
    otherwise answer ``/metrics`` with its own counts alone.
    """
    try:
        config = Config.load()
        if _NODE_CONFIG:
            # A reload (SIGHUP): the plugins' settings too (at start,
            # on_starting checks them once metrics may be imported).
            from narad.plugins import load_plugins

            config = load_plugins(config).configure(config)
    except (InvalidConfiguration, PluginError) as exc:
        if not _NODE_CONFIG:
            # Before gunicorn has set up logging.
            print(f"narad: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        # Stopping the node for a typo would be worse than ignoring the reload.
        log.error(
            "reload refused, the node keeps its settings: %s (fix %s and reload again)",
            exc,
            os.environ.get(CONFIG_ENV, "the NARAD_* variables"),
        )
        config = _NODE_CONFIG[-1]
    _NODE_CONFIG[:] = [config]
    settings = gunicorn_settings(config)
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not given:
        # Before prometheus-client is imported: it picks its mode then.
        _MADE_METRICS_DIR.append(tempfile.mkdtemp(prefix="narad-metrics-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _MADE_METRICS_DIR[0]
    elif not (os.path.isdir(given) and os.access(given, os.W_OK | os.X_OK)):
        # Else every worker dies on its first metric, in a traceback.
        print(
            f"narad: PROMETHEUS_MULTIPROC_DIR {given} is not a directory this "
            "node can write (systemd's RuntimeDirectory= makes it)",
            file=sys.stderr,
        )
        raise SystemExit(2)

    def on_exit(server: Any) -> None:
        for made in _MADE_METRICS_DIR:
            shutil.rmtree(made, ignore_errors=True)

    on_starting = settings["on_starting"]

    def checked_on_starting(server: Any) -> None:
        try:
            on_starting(server)
        except (InvalidConfiguration, PluginError, StorageError) as exc:
            log.error("%s", exc)
            on_exit(server)
            raise SystemExit(2) from None

    settings["on_starting"] = checked_on_starting
    settings["on_exit"] = on_exit
    return settings


class NaradApplication(BaseApplication):
    def __init__(self, config: Config) -> None:
        self.config = config
        super().__init__()

    def load_config(self) -> None:
        _NODE_CONFIG[:] = [self.config]
        for key, value in gunicorn_settings(self.config).items():
            self.cfg.set(key, value)

    def load(self):
        # In each worker, after the fork: what narad.serve.wsgi.get_app()
        # gives a gunicorn started by hand. Imported here: metrics must not
        # load before PROMETHEUS_MULTIPROC_DIR is set.
        from narad.app import create_app

        return create_app(node_config())


def prepare_environment(config: Config, metrics_dir: str) -> None:
    """Hand the resolved settings and the metrics directory to the workers."""
    os.environ.update(config.as_env())
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
