"""Typed errors: each status its class, carrying the node's message."""

from __future__ import annotations

import pytest
from clientfakes import FakeServer

from narad_client import BadRequest
from narad_client import Client
from narad_client import Conflict
from narad_client import Forbidden
from narad_client import Gone
from narad_client import NaradError
from narad_client import NotFound
from narad_client import PayloadTooLarge
from narad_client import ServerError
from narad_client import TooManyRequests
from narad_client import Unauthorized
from narad_client import Unavailable
from narad_client import UnexpectedResponse
from narad_client._errors import error_for

CLASSES = [
    (400, BadRequest),
    (401, Unauthorized),
    (403, Forbidden),
    (404, NotFound),
    (409, Conflict),
    (410, Gone),
    (413, PayloadTooLarge),
    (429, TooManyRequests),
    (503, Unavailable),
    (500, ServerError),
    (502, ServerError),
    (507, ServerError),
    (408, NaradError),
    (302, UnexpectedResponse),
]


@pytest.mark.parametrize(("status", "cls"), CLASSES)
def test_error_for_status(status: int, cls: type[NaradError]) -> None:
    error = error_for(status, "what went wrong", {"Retry-After": "3"})
    assert type(error) is cls
    assert isinstance(error, NaradError)
    assert (error.status, error.error) == (status, "what went wrong")
    assert str(error) == f"HTTP {status}: what went wrong"
    assert error.headers["retry-after"] == "3"


@pytest.mark.parametrize(("status", "cls"), CLASSES)
def test_fake_answers_raise_their_class(status: int, cls: type[NaradError]) -> None:
    script = [(status, {"Content-Type": "application/json"}, b'{"error": "nope"}')]
    with (
        FakeServer(script) as fake,
        Client(fake.base, retries=1, backoff=0) as c,
        pytest.raises(cls) as raised,
    ):
        c.topic("t")
    assert type(raised.value) is cls
    assert raised.value.status == status
    if status != 302:
        assert raised.value.error == "nope"


def test_too_many_requests_retry_after() -> None:
    script = [(429, {"Retry-After": "7"}, b'{"error": "slow down"}')]
    with (
        FakeServer(script) as fake,
        Client(fake.base) as c,
        pytest.raises(TooManyRequests) as raised,
    ):
        c.topic("t")
    assert raised.value.retry_after == 7.0
    assert len(fake.seen) == 1  # 429 is not retried


def test_not_narad_answers() -> None:
    script = [
        (200, {"Content-Type": "text/html"}, b"<html>hello</html>"),
        (500, {}, b"Internal error, plain text"),
        (200, {}, b'{"no": "message"}'),
    ]
    with FakeServer(script) as fake, Client(fake.base, retries=0) as c:
        with pytest.raises(UnexpectedResponse) as html:
            c.topic("t")
        assert html.value.error == (
            f"{fake.base}/v1/topics/t answered 200 without JSON: is it a Narad node?"
        )
        with pytest.raises(ServerError, match="plain text"):
            c.topic("t")
        with pytest.raises(UnexpectedResponse) as no_message:
            c.consume("t")
        assert no_message.value.error == (
            f"{fake.base}/v1/topics/t/consume answered 200 without a Narad "
            "message: is it a Narad node?"
        )


def test_a_redirect_names_where_from_and_to() -> None:
    script = [(301, {"Location": "https://narad.example/v1/topics/t"}, b"")]
    with (
        FakeServer(script) as fake,
        Client(fake.base) as c,
        pytest.raises(UnexpectedResponse) as moved,
    ):
        c.topic("t")
    assert moved.value.error == (
        f"{fake.base}/v1/topics/t answered HTTP 301, a redirect to "
        "https://narad.example/v1/topics/t (not followed)"
    )
    assert len(fake.seen) == 1  # neither followed nor retried


def test_live_errors(client: Client, node, topic: str) -> None:
    with pytest.raises(BadRequest) as bad:
        client.consume_batch(topic, max=500)
    assert bad.value.status == 400
    assert bad.value.error == "invalid argument: max must be at most 100"
    with pytest.raises(NotFound, match="not found"):
        client.produce("no-such-topic", b"x")
    with pytest.raises(Conflict):
        client.create_topic(topic)
    with pytest.raises(BadRequest):
        client.create_topic("bad name!")
    with pytest.raises(PayloadTooLarge) as large:
        client.produce(topic, b"x" * ((1 << 20) + 1))
    assert large.value.status == 413
    with pytest.raises(Gone):
        client.ack(topic, "MC45Lk1OX3Nqc1U5SmhjSEFqanM")
    with (
        Client(node.base, auth=("admin", "wrong password")) as stranger,
        pytest.raises(Unauthorized) as unauthorized,
    ):
        stranger.topics().__next__()
    assert unauthorized.value.status == 401
    assert unauthorized.value.headers["www-authenticate"].startswith("Basic")
    with Client(node.base) as anonymous, pytest.raises(Unauthorized):
        anonymous.topic(topic)


def test_no_node_is_unavailable() -> None:
    with FakeServer([]) as fake:
        base = fake.base
    # Nothing listens there now: refused on every attempt.
    with (
        Client(base, retries=2, backoff=0.01) as c,
        pytest.raises(Unavailable) as raised,
    ):
        c.create_topic("t")  # unsent: retried even though not idempotent
    assert raised.value.status == 0
    assert "cannot reach" in raised.value.error
