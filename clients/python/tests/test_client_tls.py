"""HTTPS nodes: the CA file, client certificates, and refusals not retried."""

from __future__ import annotations

import asyncio

import pytest
from tests.httpclient import ADMIN
from tests.nodes import Node
from tests.tlscerts import make_pki

from narad_client import AsyncClient
from narad_client import Client
from narad_client import Forbidden
from narad_client import Unavailable
from narad_client._core import Policy


class Counting(Policy):
    """A policy that counts the backoffs it hands out."""

    def __init__(self) -> None:
        super().__init__(retries=5, backoff=0.01)
        self.delays = 0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        self.delays += 1
        return super().delay(retry, retry_after)


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("tls")
    pki = make_pki(tmp / "pki")
    started = Node(tmp, workers=1, tls=pki, client_ca=True).start()
    try:
        yield started
    finally:
        started.stop()


def test_https_with_client_certificate(tls_node: Node) -> None:
    pki = tls_node.tls
    assert tls_node.base.startswith("https://")
    files = {
        "ca_file": str(pki.ca),
        "client_cert": str(pki.client_cert),
        "client_key": str(pki.client_key),
    }
    with Client(tls_node.base, auth=ADMIN, **files) as narad:
        narad.create_topic("secure", partitions=1)
        narad.produce("secure", b"\x00 over TLS")
        message = narad.consume("secure")
        assert message is not None and message.payload == b"\x00 over TLS"
        narad.ack("secure", message)

    async def main() -> None:
        async with AsyncClient(tls_node.base, auth=ADMIN, **files) as narad:
            await narad.produce("secure", b"async over TLS")
            taken = await narad.consume("secure")
            assert taken is not None and taken.payload == b"async over TLS"
            await narad.ack("secure", taken)
            await narad.delete_topic("secure")

    asyncio.run(main())


def test_untrusted_node_is_not_retried(tls_node: Node) -> None:
    # The public CAs do not know the node's certificate: no retry helps.
    with Client(tls_node.base, auth=ADMIN) as narad:
        counting = narad.policy = Counting()
        with pytest.raises(Unavailable) as raised:
            narad.topic("secure")
    assert raised.value.status == 0
    assert "CERTIFICATE_VERIFY_FAILED" in raised.value.error
    assert counting.delays == 0


def test_missing_client_certificate_is_forbidden(tls_node: Node) -> None:
    with (
        Client(tls_node.base, auth=ADMIN, ca_file=str(tls_node.tls.ca)) as narad,
        pytest.raises(Forbidden, match="client certificate is required"),
    ):
        narad.topic("secure")
