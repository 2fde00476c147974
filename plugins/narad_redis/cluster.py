"""A client for a Valkey or Redis Cluster: ``redis+cluster://`` storage URLs.

``storage.url`` names seed nodes of the cluster, comma-separated:
``redis+cluster://narad:PASSWORD@10.0.0.1:7000,10.0.0.2:7000/0``
(``rediss+cluster://`` with TLS; user, password and query options apply to
every node; the database must be 0, the only one a cluster has). redis-py's
cluster client learns the slot map from them and keeps one bounded pool per
node (``pool_size`` connections each).

:class:`ClusterClient` offers :class:`narad_redis.client.RetryingClient`'s
interface, so :class:`narad_redis.storage.RedisStorage` runs unchanged on it;
redis-py's own retries are off (a command it sent again after a lost reply
could apply a write twice) and :meth:`ClusterClient.call` decides, as the
single-server client does:

- ``-MOVED`` and ``-ASK``: followed at once (redis-py for plain commands and
  pipelines, :meth:`NaradCluster.run_script` for scripts), the slot map
  patched, and a refresh of the whole map asked for.
- A node refusing connections, ``-CLUSTERDOWN``, ``-TRYAGAIN``, a slot no
  node serves (a primary died and its replica is not promoted yet),
  ``-LOADING``, ``-READONLY`` (a primary demoted under us), ``-BUSY``: nothing
  ran; the slot map is refreshed and the call sent again after a backoff
  (``backoff_s`` doubling to ``backoff_max_s``, ``attempts`` waits, never
  past ``socket_timeout_s``), then :class:`StorageError` (503). A failover
  (``cluster-node-timeout`` plus an election) so costs a short window of
  503s at most, never a 500.
- A link lost after a script was sent: :class:`StorageUncertain` (503) unless
  the caller says a second run is harmless, as on a single server.

``min_replicas`` (``storage.min_replicas``): every script is followed, on the
same connection, by ``WAIT min_replicas replica_wait_ms``, so its reply comes
back only once that many replicas of the slot's primary hold the write.
Fewer within the wait: :class:`StorageUncertain` (503: the write is on the
primary and may be lost with it). With 0, a reply means the primary applied
the write (and fsynced it, with ``appendfsync always``); replication is
asynchronous, so a primary that dies before its replica copied the write
loses it when the replica takes over.

Readiness (:meth:`ClusterClient.leader_answers`) holds only while every one
of the 16384 slots is assigned to a primary that answers (within the connect
timeout) and sees the cluster as ok with every slot assigned.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any
from typing import TypeVar
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import AskError
from redis.exceptions import BusyLoadingError
from redis.exceptions import ClusterDownError
from redis.exceptions import MovedError
from redis.exceptions import NoScriptError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import ReadOnlyError
from redis.exceptions import RedisClusterException
from redis.exceptions import SlotNotCoveredError
from redis.exceptions import TryAgainError
from redis.retry import Retry

from narad.errors import InvalidConfiguration
from narad.errors import StorageError
from narad.errors import StorageFull
from narad.errors import StorageUncertain
from narad.metrics import STORAGE_RETRIES
from narad_redis.client import DRIVER_INFO
from narad_redis.client import ConnectFailed
from narad_redis.client import NotEnoughReplicas
from narad_redis.client import PoolExhausted
from narad_redis.client import ReplyLost
from narad_redis.client import _Pool
from narad_redis.client import _reply
from narad_redis.client import evalsha
from narad_redis.client import parse_seeds

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The node :meth:`ClusterClient.first_answer` is pinned to, per call.
_PINNED: ContextVar[tuple[str, int] | None] = ContextVar("narad_pinned", default=None)
#: The URL schemes of a cluster, and the single-node scheme each stands for.
SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SLOTS = 16384
#: Redirects one script call follows before it counts as a failed attempt.
MAX_REDIRECTS = 5
_BUSY = ("BUSY", "LOADING", "MASTERDOWN")


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme in SCHEMES


def parse_cluster_url(url: str) -> tuple[list[tuple[str, int]], dict[str, Any], type]:
    """The seed ``(host, port)`` pairs of a cluster URL, the connection
    options they share, and the connection class (TLS or not).

    Raises:
        InvalidConfiguration: Not a cluster URL, a unix socket, or a
            database other than 0.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise InvalidConfiguration(f"`storage.url` {parts.scheme!r} is no cluster URL")
    single = parts._replace(scheme=SCHEMES[parts.scheme]).geturl()
    seeds, options, tcp, _ = parse_seeds(single)
    if any(seed.port is None for seed in seeds):
        raise InvalidConfiguration("`storage.url`: a cluster's nodes are host:port")
    if options.pop("db", 0) not in (0, "0"):
        raise InvalidConfiguration(
            "`storage.url`: a cluster has only database 0 (drop the /N)"
        )
    return [(s.host, s.port) for s in seeds], options, tcp


class NaradCluster(RedisCluster):
    """redis-py's cluster client, plus scripts run with ``WAIT`` on the
    slot owner's connection (:meth:`run_script`)."""

    min_replicas = 0
    replica_wait_ms = 2000

    def run_script(
        self, script: Script, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        """``EVALSHA`` on the primary of the keys' slot (every key of a
        script shares one), followed by ``WAIT`` when ``min_replicas``;
        MOVED and ASK followed, the script loaded where it is missing (a
        promoted replica has none)."""
        slot = self.keyslot(keys[0])
        call = ("EVALSHA", script.sha, len(keys), *keys, *args)
        asking: ClusterNode | None = None
        for _ in range(MAX_REDIRECTS):
            node = asking or self.nodes_manager.get_node_from_slot(slot)
            pool = self.get_redis_connection(node).connection_pool
            connection = pool.get_connection()
            try:
                if asking is not None:
                    connection.send_command("ASKING")
                    connection.read_response()
                    asking = None
                try:
                    return evalsha(
                        connection,
                        call,
                        script,
                        self.min_replicas,
                        self.replica_wait_ms,
                    )
                except MovedError as exc:
                    self.nodes_manager.move_slot(exc)
                except AskError as exc:
                    asking = self._node(exc.host or node.host, exc.port)
            finally:
                pool.release(connection)
        raise TryAgainError(f"slot {slot} still redirected after {MAX_REDIRECTS} tries")

    def unpooled(self) -> redis.Redis:
        """A plain client of one primary, picked at random, on a connection
        of its own; the caller closes it (``connection_pool.disconnect()``)."""
        node = random.choice(self.get_primaries())
        pool = self.get_redis_connection(node).connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs.pop("cache", None)
        return redis.Redis(
            connection_pool=redis.ConnectionPool(
                connection_class=pool.connection_class, **kwargs
            )
        )

    def _node(self, host: str, port: int) -> ClusterNode:
        node = self.nodes_manager.get_node(host=host, port=port)
        if node is None:
            self.nodes_manager._request_refresh(
                additional_startup_nodes_info=[(host, port)]
            )
            raise TryAgainError(f"ASK to {host}:{port}, a node not known yet")
        return node


class ClusterClient:
    """Runs storage calls on a Valkey/Redis Cluster through :meth:`call`;
    the interface of :class:`narad_redis.client.RetryingClient`."""

    cluster = True
    address = None
    #: Every script the storage runs: loaded on every primary when one says
    #: NOSCRIPT in a pipeline (a promoted replica knows none of them).
    scripts: list[Script] = []

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
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.socket_timeout_s = socket_timeout_s
        self.pool_size = pool_size
        self._sleep = sleep
        self._clock = clock
        seeds, options, tcp = parse_cluster_url(url)
        self.seeds = seeds
        self._options: dict[str, Any] = {
            **options,
            "socket_timeout": socket_timeout_s,
            "socket_connect_timeout": min(socket_timeout_s, connect_timeout_s),
            "protocol": 2,
            "driver_info": DRIVER_INFO,
            "health_check_interval": 30,
        }
        self._tcp = tcp
        try:
            self.redis = NaradCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in seeds],
                # Retrying is ours to bound; redis-py must not retry underneath.
                retry=Retry(NoBackoff(), 0),
                require_full_coverage=False,
                connection_class=tcp,
                connection_pool_class=functools.partial(
                    _Pool, timeout=socket_timeout_s
                ),
                max_connections=pool_size,
                **self._options,
            )
        except (RedisClusterException, redis.RedisError) as exc:
            raise StorageError(f"no cluster node of {url!r} answered: {exc}") from exc
        self.redis.min_replicas = min_replicas
        self.redis.replica_wait_ms = replica_wait_ms

    # -- calls ----------------------------------------------------------------

    def call(
        self,
        fn: Callable[[redis.Redis], T],
        *,
        replayable: bool = True,
        backoff_max_s: float | None = None,
    ) -> T:
        """Run ``fn(cluster client)``, retrying as the module says."""
        started = self._clock()
        cap = min(backoff_max_s or self.backoff_max_s, self.backoff_max_s)
        delay = min(self.backoff_s, cap)
        waits = 0
        while True:
            try:
                self._refresh_if_asked()
                return fn(self.redis)
            except OutOfMemoryError as exc:
                raise StorageFull(str(exc)) from exc
            except NoScriptError as exc:
                # A primary promoted, or a slot moved, since: not run.
                self._load_scripts()
                last, reason = exc, "moved"
            except NotEnoughReplicas:
                raise
            except ReplyLost as exc:
                self._refresh()
                if not replayable:
                    raise StorageUncertain(
                        f"link to a cluster node lost after a write was sent, so "
                        f"it may have been applied: {exc}"
                    ) from exc
                last: Exception = exc
                reason = "connection"
            except PoolExhausted as exc:
                raise StorageError(
                    f"no storage connection came free within "
                    f"{self.socket_timeout_s:g} s (pool_size {self.pool_size})"
                ) from exc
            except (ConnectFailed, redis.ConnectionError, redis.TimeoutError) as exc:
                self._refresh()
                last, reason = exc, "connection"
            except (ClusterDownError, SlotNotCoveredError) as exc:
                self._refresh()
                last, reason = exc, "clusterdown"
            except (MovedError, AskError) as exc:
                self._refresh()
                last, reason = exc, "moved"
            except TryAgainError as exc:
                self._refresh()
                last, reason = exc, "tryagain"
            except BusyLoadingError as exc:
                self._refresh()
                last, reason = exc, "loading"
            except ReadOnlyError as exc:
                self._refresh()
                last, reason = exc, "readonly"
            except RedisClusterException as exc:
                # redis-py's own word for "no node answered" (or keys across
                # slots, a bug: then every retry fails the same way).
                if "slot" in str(exc).lower() and "same" in str(exc).lower():
                    raise
                self._refresh()
                last, reason = exc, "clusterdown"
            except redis.ResponseError as exc:
                text = _reply(exc)
                if not text.startswith(_BUSY):
                    if text.startswith("MISCONF"):
                        raise StorageError(
                            f"a cluster node refuses writes: {text}"
                        ) from exc
                    raise
                last, reason = exc, "busy"
            STORAGE_RETRIES.labels(reason=reason).inc()
            if (
                waits >= self.attempts
                or self._clock() - started >= self.socket_timeout_s
            ):
                raise StorageError(
                    f"storage unavailable after {waits} retries: {last}"
                ) from last
            self._sleep(delay)
            waits += 1
            delay = min(delay * 2, cap)

    def _load_scripts(self) -> None:
        """Load every script on every primary (after a pipeline met one
        that knows none: a replica promoted since)."""

        def load(r: redis.Redis) -> None:
            for script in self.scripts:
                r.script_load(script.script)

        self.each_primary(load)

    def refresh(self) -> None:
        """Ask for the slot map again before the next attempt."""
        self._refresh()

    def _refresh(self) -> None:
        """Ask for the slot map again before the next attempt."""
        self.redis.nodes_manager._request_refresh()

    def _refresh_if_asked(self) -> None:
        manager = self.redis.nodes_manager
        if manager._refresh_requested:
            manager._run_requested_refresh()

    # -- readiness ------------------------------------------------------------

    def leader_answers(self) -> bool:
        """Whether every slot is assigned and each primary serving slots
        answers and sees the whole cluster as ok, on connections of their
        own with the connect timeout for all (readiness must answer while
        every pooled connection is busy, and soon)."""
        for seed in self._probe_order():
            probe = self.unpooled(seed, quick=True)
            try:
                slots = probe.execute_command("CLUSTER SLOTS")
            except (redis.RedisError, OSError):
                continue
            finally:
                probe.connection_pool.disconnect()
            return _every_slot_served(slots, lambda a: self.unpooled(a, quick=True))
        return False

    @contextlib.contextmanager
    def pinned(self, address: tuple[str, int]) -> Iterator[None]:
        """Within it, :meth:`first_answer` asks ``address`` alone."""
        token = _PINNED.set(address)
        try:
            yield
        finally:
            _PINNED.reset(token)

    def primaries(self) -> list[tuple[str, int]]:
        """The primaries serving slots, as the client knows them now."""
        self._refresh_if_asked()
        return self._primaries()

    def first_answer(self, fn: Callable[[redis.Redis], T]) -> T | None:
        """``fn(client)`` on each primary in turn, on a connection of its
        own, until one answers; None when none does."""
        pinned = _PINNED.get()
        order = [pinned] if pinned else self._primaries() or self._probe_order()
        for address in order:
            probe = self.unpooled(address)
            try:
                return fn(probe)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                continue
            finally:
                probe.connection_pool.disconnect()
        return None

    def each_primary(self, fn: Callable[[redis.Redis], T]) -> list[T | Exception]:
        """``fn(client)`` on every primary, on connections of their own; an
        exception in place of the answer of a primary that did not answer."""
        answers: list[T | Exception] = []
        for address in self._primaries():
            probe = self.unpooled(address)
            try:
                answers.append(fn(probe))
            except (redis.RedisError, OSError) as exc:
                answers.append(exc)
            finally:
                probe.connection_pool.disconnect()
        return answers

    def learn_raft(self, raft: dict[str, Any]) -> None:
        """A cluster has no Raft peers to learn."""
        return None

    def unpooled(
        self, address: tuple[str, int] | None = None, *, quick: bool = False
    ) -> redis.Redis:
        """A plain client of one node on a connection of its own (default: a
        primary); ``quick``: its replies too within the connect timeout. The
        caller closes it (``connection_pool.disconnect()``)."""
        if address is None:
            address = (self._primaries() or self._probe_order())[0]
        host, port = address
        options = dict(self._options)
        if quick:
            options["socket_timeout"] = options["socket_connect_timeout"]
        return redis.Redis(
            connection_pool=redis.ConnectionPool(
                connection_class=self._tcp,
                host=host,
                port=port,
                retry=Retry(NoBackoff(), 0),
                **options,
            )
        )

    def node_of(self, key: str) -> tuple[str, int]:
        """The primary serving ``key``'s slot, as the client knows it now
        (after a refresh of the slot map, if one was asked for)."""
        self._refresh_if_asked()
        node = self.redis.nodes_manager.get_node_from_slot(self.redis.keyslot(key))
        return node.host, node.port

    def close(self) -> None:
        self.redis.close()

    def _primaries(self) -> list[tuple[str, int]]:
        return [(n.host, n.port) for n in self.redis.get_primaries()]

    def _probe_order(self) -> list[tuple[str, int]]:
        known = [(n.host, n.port) for n in self.redis.get_nodes()]
        return list(dict.fromkeys([*known, *self.seeds]))


def _every_slot_served(
    slots: list[Any], connect: Callable[[tuple[str, int]], redis.Redis]
) -> bool:
    """Whether ``CLUSTER SLOTS`` covers all 16384 slots, and each range's
    primary answers saying the cluster is ok with every slot assigned (a
    node's own view: the one that lost a slot knows it first)."""
    covered = 0
    primaries: set[tuple[str, int]] = set()
    for start, end, primary, *_ in slots:
        covered += int(end) - int(start) + 1
        host = primary[0].decode() if isinstance(primary[0], bytes) else primary[0]
        primaries.add((host, int(primary[1])))
    if covered < SLOTS:
        return False
    for address in primaries:
        probe = connect(address)
        try:
            info = probe.cluster("info")
        except (redis.RedisError, OSError):
            return False
        finally:
            probe.connection_pool.disconnect()
        if info.get("cluster_state") != "ok":
            return False
        if int(info.get("cluster_slots_assigned", 0)) < SLOTS:
            return False
    return True
