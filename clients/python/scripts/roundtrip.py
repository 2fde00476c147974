"""A round trip with an installed narad-client, run by ``check-install``
with the Python of a virtualenv that holds only narad-client and its
dependencies, from a directory outside the source tree.

Reads the node's address and the admin's password from ``NARAD_URL`` and
``NARAD_PASSWORD``; waits for the node to be ready, then produces and
consumes JSON, text and binary bodies (one at a time, in a batch, and with
the asyncio client) and checks each comes back byte for byte.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time

import httpx

import narad_client
from narad_client import AsyncClient
from narad_client import Client
from narad_client import NotFound

URL = os.environ["NARAD_URL"]
AUTH = ("admin", os.environ["NARAD_PASSWORD"])
PAYLOADS = [b'{"id": 1, "price": 1.50}', b"plain text", b"\x00\xffbinary"]
READY_WITHIN_S = 60


def fail(message: str) -> None:
    sys.exit(f"check-install: {message}")


def wait_ready() -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{URL}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    fail(f"the node at {URL} was not ready within {READY_WITHIN_S} s")


def round_trip() -> None:
    with Client(URL, auth=AUTH) as narad:
        narad.create_topic("check-install", partitions=1)
        for payload in PAYLOADS:
            narad.produce("check-install", payload)
        got = []
        while (message := narad.consume("check-install", wait=1)) is not None:
            got.append(message.payload)
            narad.ack("check-install", message)
        if got != PAYLOADS:
            fail(f"consumed {got!r}, produced {PAYLOADS!r}")
        narad.produce_batch("check-install", PAYLOADS)
        batch = narad.consume_batch("check-install", max=10, wait=1)
        if [m.payload for m in batch] != PAYLOADS:
            fail(f"batch consumed {[m.payload for m in batch]!r}")
        narad.ack_batch("check-install", batch)
        try:
            narad.topic("no-such-topic")
            fail("a missing topic was found")
        except NotFound:
            pass
    print("check-install: produce, consume, batch and ack round-trip (Client)")


async def async_round_trip() -> None:
    async with AsyncClient(URL, auth=AUTH) as narad:
        await narad.produce("check-install", PAYLOADS[2])
        message = await narad.consume("check-install", wait=1)
        if message is None or message.payload != PAYLOADS[2]:
            fail(f"async consumed {message!r}")
        await narad.ack("check-install", message)
        await narad.delete_topic("check-install")
    print("check-install: produce, consume and ack round-trip (AsyncClient)")


def main() -> None:
    if importlib.util.find_spec("narad") is not None:
        fail("the server package narad is importable next to the client")
    if not narad_client.__file__.startswith(sys.prefix):
        fail(f"narad_client imported from {narad_client.__file__}, not the venv")
    wait_ready()
    round_trip()
    asyncio.run(async_round_trip())


if __name__ == "__main__":
    main()
