"""``rediss+cluster://`` storage: a node over a Valkey Cluster it reaches by
TLS only. Each of the cluster's nodes sits behind a TLS front
(:class:`tests.tlsproxy.TlsProxy`) whose port it announces, so the slot map
and every redirect name TLS ports; a CA the fronts' certificate does not
chain to keeps the node from serving."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_embedded_durability import durable_gauge
from tests.nodes import Node
from tests.tlscerts import Pki
from tests.tlscerts import make_pki
from tests.tlsproxy import TlsProxy
from tests.valkeycluster import ValkeyCluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory) -> tuple[ValkeyCluster, list[TlsProxy], Pki]:
    """A 3-primary cluster whose nodes announce their TLS fronts' ports."""
    where = tmp_path_factory.mktemp("tls-cluster")
    pki = make_pki(where / "pki")
    cluster = ValkeyCluster(where / "cluster").up()
    proxies = [TlsProxy(node.port, pki) for node in cluster.nodes]
    try:
        for node, proxy in zip(cluster.nodes, proxies, strict=True):
            with node.client() as c:
                c.config_set("cluster-announce-port", proxy.port)
        fronts = {proxy.port for proxy in proxies}
        deadline = time.monotonic() + 30
        while not all(_announced(node, fronts) for node in cluster.nodes):
            assert time.monotonic() < deadline, "the fronts' ports not announced"
            time.sleep(0.1)
        yield cluster, proxies, pki
    finally:
        for proxy in proxies:
            proxy.close()
        cluster.down()


def _announced(node, fronts: set[int]) -> bool:
    """Whether ``node``'s slot map names only TLS fronts."""
    with node.client() as c:
        slots = c.execute_command("CLUSTER SLOTS")
    return all(int(address[1]) in fronts for s in slots for address in s[2:])


def tls_url(proxies: list[TlsProxy], ca) -> str:
    seeds = ",".join(f"127.0.0.1:{proxy.port}" for proxy in proxies[:2])
    return f"rediss+cluster://{seeds}/0?ssl_ca_certs={ca}&ssl_cert_reqs=required"


def test_a_node_serves_over_a_cluster_reached_by_tls_only(tls_cluster, tmp_path):
    cluster, proxies, pki = tls_cluster
    node = Node(tmp_path, storage_url=tls_url(proxies, pki.ca), workers=1).start()
    try:
        http = node.client()
        # Topics hash to slots all over the map: each primary holds some.
        names = [f"tls-{i}" for i in range(12)]
        for name in names:
            assert http.post("/v1/topics", {"name": name}).status == 201
            assert http.post(f"/v1/topics/{name}/produce", name.encode()).status == 202
        for name in names:
            got = http.get(f"/v1/topics/{name}/consume").json()
            assert got["payload"] == name
            ack = f"/v1/topics/{name}/ack?receipt_handle={got['receipt_handle']}"
            assert http.post(ack).status == 204
        assert durable_gauge(http) == 1
        http.close()
    finally:
        node.stop()
    primaries = {server.port for server in cluster.primaries()}
    for server, proxy in zip(cluster.nodes, proxies, strict=True):
        if server.port in primaries:
            with server.client() as c:
                assert c.dbsize() > 0  # it holds topics...
            assert proxy.handshakes > 0  # ...reached through its front
    assert f"rediss+cluster://127.0.0.1:{proxies[0].port}" in node.log.read_text()


def test_a_ca_the_fronts_do_not_chain_to_keeps_the_node_from_serving(
    tls_cluster, tmp_path
):
    _, proxies, pki = tls_cluster
    # A certificate of another CA stands in for the wrong CA file.
    node = Node(tmp_path, storage_url=tls_url(proxies, pki.stranger_cert), workers=1)
    try:
        with pytest.raises(RuntimeError, match="node exited"):
            node.start(timeout=30)
    finally:
        node.stop()
    log = node.log.read_text()
    assert "certificate verify failed" in log
