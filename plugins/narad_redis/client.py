"""A redis-py client for one Redis/Valkey server or a RedisRaft cluster (a
sharded Valkey/Redis Cluster, ``redis+cluster://``, has its own:
:mod:`narad_redis.cluster`).

``storage.url`` names one node or several, comma-separated in the URL's host
part: ``redis://narad:PASSWORD@10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379/0``
(user, password, database and query options apply to every node). The client
talks to one node at a time, through a bounded pool (``pool_size``), and
knows every address it has seen: the seeds, every ``-MOVED`` target, and the
peers a RedisRaft node lists in ``INFO raft`` (read by :meth:`leader_answers`
and :meth:`first_answer`).

:meth:`RetryingClient.call` is the one place that decides what is retried:

- ``-MOVED <slot> host:port``: a follower names the leader. The client
  follows it at once, unless that address refused a connection within the
  last ``backoff_max_s``: after a leader dies its peers go on naming it
  until they elect another (about 1.5 s), so the client asks the next
  known node after a backoff instead.
- A connection refused, or not made or answered (the handshake) within
  ``connect_timeout_s``: nothing was sent. The address counts as down for
  ``backoff_max_s`` and the next known node that is not down is asked at
  once. A pooled connection found dead before the command left (redis-py's
  health-check PING, a failed send) is replaced by a fresh one to the same
  node at once.
- Replies that say the command was not run: ``-CLUSTERDOWN``, ``-TRYAGAIN``,
  ``-LOADING``, ``-BUSY`` (another client's script runs long),
  ``-READONLY`` (a replica), ``-NOCLUSTER`` and RedisRaft's plain ``-ERR``
  forms (``not leader``, ``no raft leader``, ``leader transfer is in
  progress``, ``... try again``, ``cluster down``): the next known node is
  asked after a backoff (a node cut off from the majority says "no raft
  leader" while the others have one).
- The link lost, or the reply timed out, after the command was sent (or
  RedisRaft answered ``-TIMEOUT``: no majority in time): the command may
  have run. A node whose reply timed out counts as down, as one that
  refused a connection does (a frozen leader keeps its port open while its
  peers elect another), so later calls ask the other known nodes. The
  command is sent again only when the caller says a second run is
  harmless (``replayable``: reads, and scripts whose rerun changes nothing
  a client relies on: an append whose entries all carry idempotency keys,
  an ack, a reserve; see
  :data:`narad_redis.storage.REPLAYABLE`). Otherwise :class:`StorageUncertain`
  is raised at once (503, saying the write may have been applied): running
  it again could apply it twice within one request.
- No free pooled connection within the socket timeout: :class:`StorageError`
  without retrying (the wait already took that long).
- ``-MISCONF`` (the server could not write its disk and refuses every write
  until it can): :class:`StorageError` without retrying.

``storage.min_replicas`` (the pool's ``min_replicas``): every script is
followed by ``WAIT`` on its connection (:func:`evalsha`); fewer replicas
confirming in time raise :class:`NotEnoughReplicas` (503).

The budget of one call: ``attempts`` backoff waits (``backoff_s``, doubling
up to ``backoff_max_s``); moving to another live node costs no wait, up to
one more move than there are known nodes; and no attempt starts once
``socket_timeout_s`` has passed since the call began (a node that hangs has
used that much already). Then :class:`StorageError`: 503 ``storage
unavailable, retry``.

Moving to another node opens a new pool; the old one closes its idle
connections at once and every other one as its command returns, so a worker
holds at most ``pool_size`` connections to the current node plus those of
commands still running elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import TypeVar
from urllib.parse import urlsplit

import hiredis
import redis
from gevent.monkey import get_original
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.connection import parse_url
from redis.exceptions import BusyLoadingError
from redis.exceptions import ClusterDownError
from redis.exceptions import MovedError
from redis.exceptions import NoScriptError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import ReadOnlyError
from redis.exceptions import TryAgainError
from redis.retry import Retry

from narad import __version__
from narad.errors import InvalidConfiguration
from narad.errors import StorageError
from narad.errors import StorageFull
from narad.errors import StorageUncertain
from narad.metrics import STORAGE_RETRIES

log = logging.getLogger(__name__)

# The unpatched poll under a gevent worker: gevent's own waits on its hub,
# which a zero-timeout readiness check does not need.
_poll, _POLLIN = get_original("select", ["poll", "POLLIN"])
# What each connection reports in CLIENT SETINFO (redis-py(narad_v0.1.0) in
# CLIENT LIST), made once: left to itself, redis-py looks its own version up
# in the installed distributions' metadata for every connection it makes,
# a slow scan paid at once by every caller when a crowd of requests grows
# the pool.
DRIVER_INFO = redis.DriverInfo().add_upstream_driver("narad", __version__)

T = TypeVar("T")

#: Most addresses remembered (seeds first); MOVED targets and raft peers past
#: it replace the oldest learned one.
MAX_KNOWN = 64

# RedisRaft's transient states, as plain -ERR replies (redis-py strips "ERR ")
# or under their own codes. Each means the command was not run.
_RAFT_TRANSIENT = re.compile(
    r"^(?:not leader|no raft leader|leader transfer is in progress|cluster ?down"
    r"|nocluster)\b|\btry again\b",
    re.IGNORECASE,
)


# -BUSY: another client's script has run past busy-reply-threshold; every
# other command is refused (not run) until it ends.
_BUSY = re.compile(r"BUSY\b")
# -MISCONF: the server failed to write its disk (a snapshot or its AOF) and
# refuses every write, unrun, until a write succeeds again: no quick retry helps.
_MISCONF = re.compile(r"MISCONF\b")


class ReplyLost(redis.ConnectionError):
    """The link failed after a command was sent: the command may have run."""


class ConnectFailed(redis.ConnectionError):
    """No connection could be made (refused, timed out, handshake refused)."""


class PoolExhausted(redis.ConnectionError):
    """No pooled connection came free within the pool's timeout."""


class NotEnoughReplicas(StorageUncertain):
    """A write is on its primary, but fewer replicas than ``min_replicas``
    confirmed it within the wait."""


@dataclass(frozen=True)
class Address:
    """A node: ``host:port``, or a unix socket path (``port`` None)."""

    host: str
    port: int | None = None

    def __str__(self) -> str:
        if self.port is None:
            return self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


# -- connections ------------------------------------------------------------


class _ReplyTracking:
    """Tells a link lost before a command left (nothing ran: safe to send it
    again) from one lost after (it may have run): the latter raises
    :class:`ReplyLost`. redis-py's own traffic (the handshake on connect, the
    health-check PING) never counts as sent."""

    _sent = False  # a command of ours left; its reply may not have arrived
    _quiet = False  # inside redis-py's handshake or health check

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        quiet, self._quiet = self._quiet, True
        try:
            super().connect_check_health(*args, **kwargs)
        except (BusyLoadingError, ConnectFailed):
            raise
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise ConnectFailed(str(exc)) from exc
        finally:
            self._quiet = quiet

    def on_connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        # The handshake is part of connecting: a frozen process's port still
        # accepts connections (the kernel does), and its silence must cost
        # the connect timeout, after which the next node is asked, not the
        # socket timeout.
        self._sock.settimeout(self.socket_connect_timeout)
        try:
            super().on_connect_check_health(*args, **kwargs)
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.socket_timeout)

    def check_health(self) -> None:
        quiet, self._quiet = self._quiet, True
        try:
            super().check_health()
        finally:
            self._quiet = quiet

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        # redis-py's order: connect, then the health check, then the command.
        if not self._sock:
            self.connect_check_health(check_health=False)
        if check_health:
            self.check_health()
        self._sent = False
        super().send_packed_command(command, check_health=False)
        self._sent = not self._quiet

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        sent = self._sent and not self._quiet
        try:
            return super().read_response(*args, **kwargs)
        except BusyLoadingError:
            raise  # -LOADING is a reply: the command was refused, not run
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if sent:
                raise ReplyLost(str(exc)) from exc
            raise


class _Tcp(_ReplyTracking, redis.Connection):
    pass


class _Tls(_ReplyTracking, redis.SSLConnection):
    pass


class _Unix(_ReplyTracking, redis.UnixDomainSocketConnection):
    pass


class _Pool(redis.ConnectionPool):
    """The bounded pool of one node; once retired (the client moved to
    another node) it closes each connection as it comes back.

    Lean where every storage call passes: taking a free connection is a list
    pop, and the check that it is still clean (no reply left unread, not
    closed by the server) is one non-blocking poll of its socket. redis-py's
    own pools spend more than that on observability hooks, a queue and a
    gevent-patched poll, which under a gevent worker cost a produce about as
    much as the rest of its storage call. A caller finding all
    ``max_connections`` taken waits up to ``timeout`` for one, then gets
    :class:`PoolExhausted`.
    """

    retired = False
    # WAIT after every script (storage.min_replicas), and for how long.
    min_replicas = 0
    replica_wait_ms = 0

    def __init__(
        self,
        *,
        timeout: float,
        min_replicas: int = 0,
        replica_wait_ms: int = 0,
        **kwargs: Any,
    ) -> None:
        self.timeout = timeout
        self.min_replicas = min_replicas
        self.replica_wait_ms = replica_wait_ms
        super().__init__(**kwargs)

    def reset(self) -> None:
        super().reset()  # also after a fork: the parent's connections are not ours
        self._freed = threading.Condition(threading.Lock())
        self._waiting = 0
        # The scripts the node ran for this pool (gone again after a restart
        # or SCRIPT FLUSH, which a NOSCRIPT reply tells): see run_scripts.
        self.loaded: set[str] = set()

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        self._checkpid()
        try:
            connection = self._available_connections.pop()
        except IndexError:
            connection = self._new_or_freed()
        self._in_use_connections.add(connection)
        try:
            if connection._sock is None:
                connection.connect()
            elif _unclean(connection):
                connection.disconnect()
                connection.connect()
        except BaseException:
            self.release(connection)
            raise
        return connection

    def _new_or_freed(self) -> Any:
        """A new connection while fewer than ``max_connections`` exist, else
        the first one released within ``timeout``."""
        deadline = time.monotonic() + self.timeout
        with self._freed:
            self._waiting += 1
            try:
                while True:
                    if self._available_connections:
                        return self._available_connections.pop()
                    if self._created_connections < self.max_connections:
                        return self.make_connection()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise PoolExhausted("No connection available.")
                    self._freed.wait(left)
            finally:
                self._waiting -= 1

    def release(self, connection: Any) -> None:
        self._checkpid()
        try:
            self._in_use_connections.remove(connection)
        except KeyError:
            return  # not handed out by this pool (or before a fork)
        if self.retired or connection.should_reconnect():
            connection.disconnect()
        self._available_connections.append(connection)
        if self._waiting:
            with self._freed:
                self._freed.notify()

    def retire(self) -> None:
        self.retired = True
        self.disconnect(inuse_connections=False)


def _unclean(connection: Any) -> bool:
    """Whether a pooled connection has bytes waiting (a reply left unread by
    a call cut short) or was closed by the server."""
    sock = connection._sock
    if getattr(sock, "pending", None) is not None and sock.pending():
        return True  # TLS: decrypted bytes above the socket
    poller = _poll()
    poller.register(sock.fileno(), _POLLIN)
    return bool(poller.poll(0))


def run_script(
    script: Script, keys: Sequence[Any], args: Sequence[Any], client: redis.Redis
) -> Any:
    """``EVALSHA`` of ``script`` on one pooled connection of ``client``,
    loading the script first if the server does not know it (a restarted
    server, a new leader), followed by ``WAIT`` when the pool's
    ``min_replicas`` asks for it (:func:`evalsha`).

    The same commands as redis-py's ``Script.__call__``, without the
    client's per-command layers (a retry wrapper, observability records)
    that a Narad storage call does not use; the connection's own error
    handling is unchanged (it closes itself on any error mid-command).
    """
    runner = getattr(client, "run_script", None)
    if runner is not None:  # a cluster: run on the slot's primary
        return runner(script, keys, args)
    pool = client.connection_pool
    if not isinstance(pool, _Pool):  # a client given ready-made (tests)
        return script(keys=keys, args=args, client=client)
    call = ("EVALSHA", script.sha, len(keys), *keys, *args)
    connection = pool.get_connection()
    try:
        reply = evalsha(
            connection, call, script, pool.min_replicas, pool.replica_wait_ms
        )
    finally:
        pool.release(connection)
    pool.loaded.add(script.sha)
    return reply


def run_scripts(
    calls: Sequence[tuple[Script, Sequence[Any], Sequence[Any]]], client: redis.Redis
) -> list[Any]:
    """Each ``(script, keys, args)`` of ``calls``, in order; each one's reply.

    Pipelined on one pooled connection of ``client`` once the node has run
    each of the scripts: the server reads them together and makes their
    writes durable with one fsync, and an error reply is raised once every
    reply is read. ``WAIT`` (the pool's ``min_replicas``) follows the last.
    A script the node lost since (a restart, ``SCRIPT FLUSH``) is refused
    with NOSCRIPT while the calls after it run: it is loaded and its call
    sent again, after them. So the calls run in order but in that case,
    which only concurrent callers' calls may share (none waits on another).

    One by one, in order, the first time, on a cluster, and for a client
    given ready-made (tests).
    """
    pool = getattr(client, "connection_pool", None)  # none on a cluster
    if not isinstance(pool, _Pool) or not all(
        script.sha in pool.loaded for script, _, _ in calls
    ):
        return [run_script(script, keys, args, client) for script, keys, args in calls]
    commands = [
        ("EVALSHA", script.sha, len(keys), *keys, *args) for script, keys, args in calls
    ]
    waiting = pool.min_replicas > 0
    if waiting:
        commands.append(("WAIT", pool.min_replicas, pool.replica_wait_ms))
    connection = pool.get_connection()
    try:
        # One send: the server reads them together only if they arrive so.
        connection.send_packed_command(
            [b"".join(chunk for c in commands for chunk in _packed(connection, c))]
        )
        replies: list[Any] = []
        error: redis.ResponseError | None = None
        for script, _, _ in calls:
            try:
                replies.append(connection.read_response())
            except NoScriptError as exc:
                pool.loaded.discard(script.sha)
                replies.append(exc)  # refused, not run: sent again below
            except redis.ResponseError as exc:
                replies.append(exc)
                error = error or exc
        if waiting:
            _check_replicas(
                connection,
                connection.read_response(),
                pool.min_replicas,
                pool.replica_wait_ms,
            )
        if error is not None:
            raise error
        for index, reply in enumerate(replies):
            if isinstance(reply, NoScriptError):
                script = calls[index][0]
                replies[index] = evalsha(
                    connection,
                    commands[index],
                    script,
                    pool.min_replicas,
                    pool.replica_wait_ms,
                )
                pool.loaded.add(script.sha)
        return replies
    finally:
        pool.release(connection)


def evalsha(
    connection: Any,
    call: tuple[Any, ...],
    script: Script,
    min_replicas: int = 0,
    wait_ms: int = 0,
) -> Any:
    """Send ``call`` (an EVALSHA of ``script``) on ``connection`` and read
    its reply, loading the script if the server lacks it. With
    ``min_replicas``, ``WAIT min_replicas wait_ms`` goes with it, on the same
    connection (WAIT counts the replicas holding this connection's writes),
    and too few confirmations raise :class:`NotEnoughReplicas`."""
    waiting = min_replicas > 0
    _send(connection, call)
    if waiting:
        _send(connection, ("WAIT", min_replicas, wait_ms))
    try:
        reply = connection.read_response()
    except NoScriptError:
        # Refused, not run: load it and send the call again.
        if waiting:
            _skip_reply(connection)
        connection.send_command("SCRIPT", "LOAD", script.script)
        connection.read_response()
        return evalsha(connection, call, script, min_replicas, wait_ms)
    except redis.ResponseError:
        if waiting:
            _skip_reply(connection)
        raise
    if waiting:
        _check_replicas(connection, connection.read_response(), min_replicas, wait_ms)
    return reply


def _check_replicas(
    connection: Any, acked: int, min_replicas: int, wait_ms: int
) -> None:
    """Raise :class:`NotEnoughReplicas` when ``WAIT`` counted too few."""
    if acked < min_replicas:
        where = f"{connection.host}:{connection.port}"
        raise NotEnoughReplicas(
            f"the write is on {where}, but {acked} of the {min_replicas} "
            f"replicas storage.min_replicas asks for confirmed it within "
            f"{wait_ms} ms: it may be lost if that primary fails"
        )


def _skip_reply(connection: Any) -> None:
    """Read the WAIT's reply after its script's error, left unread else; an
    error itself (a replica refuses WAIT, answering a MOVED script) says
    nothing more than the script's."""
    with contextlib.suppress(redis.ResponseError):
        connection.read_response()


def _send(connection: Any, command: tuple[Any, ...]) -> None:
    """Send ``command`` as ``send_command`` would, packed by hiredis in one
    call: redis-py's packer first looks at every argument in Python, a
    sizeable part of an append's packing with its dozens of arguments."""
    connection.send_packed_command(_packed(connection, command))


def _packed(connection: Any, command: tuple[Any, ...]) -> list[bytes]:
    try:
        return [hiredis.pack_command(command)]
    except TypeError:  # a bytearray (redis-py converts it) or a value it refuses
        return connection.pack_command(*command)


@dataclass(frozen=True)
class _Link:
    """The node the client talks to now and its pool (``address`` is None
    for a client given ready-made)."""

    address: Address | None
    redis: redis.Redis


# -- seeds ------------------------------------------------------------------


def parse_seeds(url: str) -> tuple[list[Address], dict[str, Any], type, type]:
    """The seed addresses of ``url``, the connection options they share, and
    the connection classes for TCP addresses and for unix sockets.

    Raises:
        InvalidConfiguration: The URL's host list is malformed.
    """
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    singles = [url]
    if parts.scheme != "unix" and "," in hosts:
        names = hosts.split(",")
        if not all(n.strip() for n in names):
            raise InvalidConfiguration(
                f"`storage.url` has an empty node in its list {hosts!r}: "
                "write redis://host1:port1,host2:port2/0"
            )
        singles = [
            parts._replace(netloc=f"{userinfo}{at}{name.strip()}").geturl()
            for name in names
        ]
    seeds: list[Address] = []
    options: dict[str, Any] = {}
    for single in singles:
        try:
            kwargs = parse_url(single)
        except ValueError as exc:
            raise InvalidConfiguration(f"`storage.url`: {exc}") from exc
        if "path" in kwargs:
            seeds.append(Address(kwargs.pop("path")))
        else:
            host, port = kwargs.pop("host", "localhost"), kwargs.pop("port", 6379)
            seeds.append(Address(host, port))
        kind = kwargs.pop("connection_class", redis.Connection)
        options = kwargs
    tcp = _Tls if kind is redis.SSLConnection else _Tcp
    return seeds, options, tcp, _Unix


# -- the client ---------------------------------------------------------------


class RetryingClient:
    """Runs storage calls on the current node through :meth:`call`."""

    def __init__(
        self,
        url: str,
        *,
        attempts: int = 8,
        backoff_s: float = 0.02,
        backoff_max_s: float = 1.0,
        socket_timeout_s: float = 15.0,
        connect_timeout_s: float = 2.0,
        pool_size: int = 32,
        min_replicas: int = 0,
        replica_wait_ms: int = 2000,
        client: redis.Redis | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.socket_timeout_s = socket_timeout_s
        self.pool_size = pool_size
        self.min_replicas = min_replicas
        self.replica_wait_ms = replica_wait_ms
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._down: dict[Address, float] = {}  # address -> down until
        self._reported: set[Address] = set()  # logged as unreachable
        self._answering: Address | None = None  # the last node a call succeeded on
        self._options: dict[str, Any] = {
            "socket_timeout": socket_timeout_s,
            "socket_connect_timeout": min(socket_timeout_s, connect_timeout_s),
            # Retrying is ours to bound; redis-py must not retry underneath.
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 30,
            # RESP2: every RESP server speaks it (RedisRaft, older Redis).
            "protocol": 2,
            "driver_info": DRIVER_INFO,
        }
        if client is not None:
            self.known: list[Address] = []
            self._seeds = 0
            self._link = _Link(None, client)
            return
        seeds, options, self._tcp_class, self._unix_class = parse_seeds(url)
        self._options |= options
        self.known = list(dict.fromkeys(seeds))
        self._seeds = len(self.known)
        self._link = self._open(self.known[0])

    @property
    def redis(self) -> redis.Redis:
        """The client of the node talked to now."""
        return self._link.redis

    @property
    def address(self) -> Address | None:
        """The node talked to now."""
        return self._link.address

    # -- calls ----------------------------------------------------------------

    def call(
        self,
        fn: Callable[[redis.Redis], T],
        *,
        replayable: bool = True,
        backoff_max_s: float | None = None,
    ) -> T:
        """Run ``fn(client)`` on the current node, retrying as the module says.

        Args:
            fn: One storage call (a command, a pipeline, a script).
            replayable: Whether running ``fn`` twice is harmless; when False,
                a link lost after it was sent raises :class:`StorageUncertain`
                instead of sending it again.
            backoff_max_s: A lower cap on the waits than the client's, for a
                caller that must notice a new leader sooner.

        Raises:
            StorageFull: The server refused a write for memory.
            StorageUncertain: A non-replayable call may or may not have run.
            StorageError: No node answered within the retry budget, or the
                server refuses writes for its disk (``-MISCONF``).
        """
        started = self._clock()
        cap = min(backoff_max_s or self.backoff_max_s, self.backoff_max_s)
        delay = min(self.backoff_s, cap)
        waits = moves = 0
        while True:
            link = self._link
            try:
                result = fn(link.redis)
            except MovedError as exc:
                target = self.learn(Address(exc.host, exc.port))
                last: Exception = exc
                reason = "moved"
                if not self._is_down(target):
                    self._switch(link, target)
                    if moves <= len(self.known):
                        moves += 1
                        STORAGE_RETRIES.labels(reason=reason).inc()
                        continue  # the leader is named: no need to wait
                else:
                    # Its peers still name a leader that refused us lately.
                    self._rotate(link, avoid=target)
            except OutOfMemoryError as exc:
                # -OOM: over maxmemory, the server refused the write before it
                # changed anything (a script is refused at its first write).
                raise StorageFull(str(exc)) from exc
            except ReplyLost as exc:
                if isinstance(exc.__cause__, redis.TimeoutError):
                    # No reply within the socket timeout: a frozen node (a
                    # hung leader keeps its port open while its peers elect
                    # another). The next attempt, and the next calls, ask
                    # the other nodes instead of waiting on it again.
                    self._failed(link, exc)
                if not replayable:
                    raise StorageUncertain(
                        f"link to {link.address or 'storage'} lost after a write "
                        f"was sent, so it may have been applied: {exc}"
                    ) from exc
                last, reason = exc, "connection"
            except PoolExhausted as exc:
                raise StorageError(
                    f"no storage connection came free within "
                    f"{self.socket_timeout_s:g} s (pool_size {self.pool_size})"
                ) from exc
            except BusyLoadingError as exc:
                last, reason = exc, "loading"
                self._rotate(link)
            except ConnectFailed as exc:
                last, reason = exc, "connection"
                if self._failed(link, exc) and moves <= len(self.known):
                    moves += 1
                    STORAGE_RETRIES.labels(reason=reason).inc()
                    continue
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # A pooled link found dead before the command left (the
                # health check's PING, a failed send): try a fresh one at once.
                last, reason = exc, "connection"
                if moves <= len(self.known):
                    moves += 1
                    STORAGE_RETRIES.labels(reason=reason).inc()
                    continue
            except redis.ResponseError as exc:
                reason = _transient(exc)
                if reason is None:
                    if _MISCONF.match(_reply(exc)):
                        raise StorageError(
                            f"{link.address or 'storage'} refuses writes: {_reply(exc)}"
                        ) from exc
                    if not _timed_out(exc):
                        raise
                    if not replayable:
                        raise StorageUncertain(
                            f"{link.address or 'storage'} timed out committing a "
                            f"write, so it may have been applied: {exc}"
                        ) from exc
                    reason = "timeout"
                last = exc
                self._rotate(link)
            else:
                if link.address != self._answering:
                    self._answered(link.address)
                return result
            STORAGE_RETRIES.labels(reason=reason).inc()
            if waits >= self.attempts or (
                self._clock() - started >= self.socket_timeout_s
            ):
                raise StorageError(
                    f"storage unavailable after {waits} retries: {last}"
                ) from last
            self._sleep(delay)
            waits += 1
            delay = min(delay * 2, cap)

    # -- readiness ------------------------------------------------------------

    def first_answer(self, fn: Callable[[redis.Redis], T]) -> T | None:
        """``fn(client)`` on the current node, else on each other known node
        (a connection of its own), once each and without waiting; None when
        no node answers."""
        try:
            return fn(self.redis)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass
        for address in self._others():
            probe = self.unpooled(address)
            try:
                return fn(probe)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                continue
            finally:
                probe.connection_pool.disconnect()
        return None

    def leader_answers(self) -> bool:
        """Whether a node that accepts writes answers, on connections of its
        own (readiness must answer while every pooled connection is busy).

        On RedisRaft (``INFO raft`` has a role) that is the leader: a node
        that is leader, or the leader a node names, confirming it is. On any
        other server, a node answering at all.
        """
        tried: set[Address | None] = set()
        # The order grows as nodes name their peers: each is asked once.
        while pending := [a for a in self._probe_order() if a not in tried]:
            address = pending[0]
            tried.add(address)
            try:
                raft = self._raft_info(address)
                if raft is None:
                    return True  # no RedisRaft: it answered
                if raft.get("raft_role") == "leader":
                    return True
                leader = self.learn_raft(raft)
                if leader is not None:
                    named = self._raft_info(leader)
                    if named is not None and named.get("raft_role") == "leader":
                        return True
            except (redis.RedisError, OSError):
                continue
        return False

    def learn_raft(self, raft: dict[str, Any]) -> Address | None:
        """Remember the peers an ``INFO raft`` lists; the leader it names, if
        it names another node."""
        leader = None
        for key, value in raft.items():
            if not key.startswith("raft_node") or not isinstance(value, dict):
                continue
            if "addr" in value and "port" in value:
                peer = self.learn(Address(str(value["addr"]), int(value["port"])))
                if value.get("id") == raft.get("raft_leader_id"):
                    leader = peer
        return leader

    def _raft_info(self, address: Address | None) -> dict[str, Any] | None:
        """``INFO raft`` of a node, None if it is no RedisRaft node."""
        probe = self.unpooled(address)
        try:
            try:
                raft = probe.info("raft")
            except redis.ResponseError:
                # No INFO for this user: then answering PING is all we learn.
                probe.ping()
                return None
            return raft if raft.get("raft_role") else None
        finally:
            probe.connection_pool.disconnect()

    # -- nodes ----------------------------------------------------------------

    def learn(self, address: Address) -> Address:
        """Remember ``address`` (a MOVED target, a raft peer)."""
        if address not in self.known and self._link.address is not None:
            with self._lock:
                if address not in self.known:
                    if len(self.known) >= MAX_KNOWN:
                        del self.known[self._seeds]
                    self.known.append(address)
        return address

    def unpooled(self, address: Address | None = None) -> redis.Redis:
        """A client on a connection of its own, outside the bounded pool, to
        ``address`` (default: the node talked to now). The caller closes it
        (``connection_pool.disconnect()``)."""
        if address is None or address == self._link.address:
            return detached(self.redis)
        return redis.Redis(
            connection_pool=redis.ConnectionPool(**self._connection_kwargs(address))
        )

    def close(self) -> None:
        self.redis.close()

    def _connection_kwargs(self, address: Address) -> dict[str, Any]:
        kwargs = dict(self._options)
        if address.port is None:
            kwargs.update(connection_class=self._unix_class, path=address.host)
        else:  # a TCP seed's peer, or a MOVED target of a unix seed
            kwargs.update(
                connection_class=self._tcp_class, host=address.host, port=address.port
            )
        return kwargs

    def _open(self, address: Address) -> _Link:
        pool = _Pool(
            max_connections=self.pool_size,
            # A gevent worker runs thousands of requests at once: callers
            # queue for one of pool_size connections (as long as a command
            # may take), and a waiting consumer holds none.
            timeout=self.socket_timeout_s,
            min_replicas=self.min_replicas,
            replica_wait_ms=self.replica_wait_ms,
            **self._connection_kwargs(address),
        )
        return _Link(address, redis.Redis(connection_pool=pool))

    def _switch(self, link: _Link, address: Address) -> None:
        """Talk to ``address`` from now on, unless someone moved since
        ``link`` was current (then the next attempt uses their choice)."""
        with self._lock:
            if self._link is not link or link.address == address:
                return
            self._link = self._open(address)
        link.redis.connection_pool.retire()

    def _rotate(self, link: _Link, avoid: Address | None = None) -> bool:
        """Move from ``link``'s node to the next known node not down; True if
        there was one."""
        if link.address is None:
            return False
        now = self._clock()
        start = self.known.index(link.address) if link.address in self.known else -1
        ring = self.known[start + 1 :] + self.known[: start + 1]
        for address in ring:
            if (
                address not in (link.address, avoid)
                and self._down.get(address, 0) <= now
            ):
                self._switch(link, address)
                return True
        return False

    def _failed(self, link: _Link, exc: Exception) -> bool:
        """``link``'s node refused a connection: down for a while; move on."""
        address = link.address
        if address is None:
            return False
        self._down[address] = self._clock() + self.backoff_max_s
        if address not in self._reported:
            self._reported.add(address)
            log.warning("storage node %s is unreachable: %s", address, exc)
        return self._rotate(link)

    def _answered(self, address: Address | None) -> None:
        """A call succeeded on ``address``, not the node that answered last:
        said once per change (a new leader), not once per node tried."""
        self._down.pop(address, None)
        self._reported.discard(address)
        if self._answering is not None:
            log.info(
                "storage: %s answers now, in place of %s", address, self._answering
            )
        self._answering = address

    def _is_down(self, address: Address) -> bool:
        return self._down.get(address, 0) > self._clock()

    def _others(self) -> Iterator[Address]:
        return (a for a in list(self.known) if a != self._link.address)

    def _probe_order(self) -> list[Address | None]:
        return [self._link.address, *self._others()]


def detached(client: redis.Redis) -> redis.Redis:
    """A client to the same node as ``client``, on a connection of its own
    (the caller closes it: ``connection_pool.disconnect()``); for a cluster
    client, to one of its primaries, picked at random (a subscription to
    ``PUBLISH``'s channels hears the whole cluster on any node)."""
    unpooled = getattr(client, "unpooled", None)
    if unpooled is not None:
        return unpooled()
    pool = client.connection_pool
    return redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, **pool.connection_kwargs
        )
    )


def _transient(exc: redis.ResponseError) -> str | None:
    """The retry reason of a reply saying the command was not run, or None."""
    if isinstance(exc, ClusterDownError):
        return "clusterdown"
    if isinstance(exc, TryAgainError):
        return "tryagain"
    if isinstance(exc, ReadOnlyError):
        return "readonly"
    reply = _reply(exc)
    if _RAFT_TRANSIENT.search(reply):
        return "raft"
    if _BUSY.match(reply):
        return "busy"
    return None


def _timed_out(exc: redis.ResponseError) -> bool:
    """RedisRaft's -TIMEOUT: no majority answered in time. A write may still
    be committed later; a read was not served."""
    return _reply(exc).startswith("TIMEOUT")


def _reply(exc: redis.ResponseError) -> str:
    """The server's error reply, without the note redis-py puts before it
    when it came from a pipeline ("Command # 1 (...) of pipeline caused
    error: ...")."""
    text = str(exc)
    if text.startswith("Command # "):
        return text.rpartition(" of pipeline caused error: ")[2]
    return text
