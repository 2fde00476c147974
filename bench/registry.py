"""Registry figures: ``GET /registry/schemas/ids/{id}`` and registration
throughput beside a plain produce, in one run.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/registry.py``
(``--seconds N`` per phase, default 4; ``--workers N``, default 4).

Starts ``narad serve`` as ``bench/messaging.py`` does (gunicorn with Narad's
gevent workers, the embedded Valkey: append-only, fsync always) and drives it
with the same load generator, 32 keep-alive connections, one request each in
flight:

- produce: a 1 KiB JSON text to a topic without a schema (the baseline);
- schema by id: ``GET /registry/schemas/ids/{id}`` of an Avro schema, what
  every deserializer asks once per id (it caches the answer);
- register, same schema: ``POST /subjects/{s}/versions`` of a schema that is
  the subject's latest version already, what a serializer with
  ``auto.register.schemas`` asks once per process start: nothing is written;
- register, new version: each request adds an optional field to the
  connection's own standalone subject (BACKWARD, checked against the
  latest version), so every request parses, checks and appends a version
  with its global id.

Each phase's figures are requests per second; ``of produce`` divides by the
produce phase's, measured first in the same run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
from pathlib import Path

import messaging
from messaging import BODY
from messaging import CLIENTS
from messaging import Usage
from messaging import call
from messaging import constant
from messaging import request
from messaging import run_load
from messaging import wait_ready


class Node(messaging.Servers):
    """``narad serve`` alone (the baseline is its own produce)."""

    def start(self) -> None:
        log = self.tmp / "narad.log"
        self.narad = self._spawn([sys.executable, "-m", "narad.cli", "serve"], log)
        wait_ready(self.port, "/readyz", self.narad, log)
        self.valkey, self.narad_workers = self._processes(self.narad.pid)


def record(fields: int) -> dict:
    """An Avro record of ``fields`` optional fields after its id."""
    return {
        "type": "record",
        "name": "Order",
        "namespace": "bench",
        "fields": [
            {"name": "id", "type": "string"},
            *({"name": f"f{i}", "type": "long", "default": 0} for i in range(fields)),
        ],
    }


def registration(subject: str, fields: int) -> bytes:
    body = json.dumps({"schema": json.dumps(record(fields))}).encode()
    return request("POST", f"/registry/subjects/{subject}/versions", body)


def evolving(prefix: str):
    """Each connection's own subject, one new field per request."""
    connections = itertools.count()

    def factory():
        subject = f"{prefix}-{next(connections)}"
        fields = itertools.count(1)

        def driver(prev):
            done = 1 if prev is not None and prev[0] == 200 else 0
            return registration(subject, next(fields)), done

        return driver

    return factory


def post(port: int, path: str, body: dict) -> dict:
    status, data = call(port, "POST", path, json.dumps(body).encode())
    assert status in (200, 201), data
    return json.loads(data)


def measure(node: Node, seconds: float, factory, ok: int) -> tuple[float, str]:
    groups = {"gunicorn workers": node.narad_workers, "valkey": node.valkey}
    with Usage(groups) as usage:
        rate, statuses = run_load(node.port, CLIENTS, seconds, factory)
    if set(statuses) != {ok}:
        sys.exit(f"unexpected statuses {dict(statuses)}")
    return rate, usage.text


def report(node: Node, seconds: float) -> None:
    port = node.port
    print(
        f"narad serve: {node.workers} workers (gevent), embedded Valkey (appendonly, "
        f"fsync always); {CLIENTS} connections, one request each in flight; "
        f"{seconds:g} s per phase after {messaging.WARMUP_S:g} s warm-up"
    )
    print()
    post(port, "/v1/topics", {"name": "bench-plain", "partitions": 3})
    shown = post(
        port,
        "/registry/subjects/bench-shown/versions",
        {"schema": json.dumps(record(8))},
    )["id"]
    post(
        port,
        "/registry/subjects/bench-same/versions",
        {"schema": json.dumps(record(8))},
    )
    phases = [
        (
            "produce (1 KiB, no schema)",
            constant(request("POST", "/v1/topics/bench-plain/produce", BODY), 202, 1),
            202,
        ),
        (
            "GET /schemas/ids/{id}",
            constant(request("GET", f"/registry/schemas/ids/{shown}"), 200, 1),
            200,
        ),
        (
            "register, same schema",
            constant(registration("bench-same", 8), 200, 1),
            200,
        ),
        ("register, new version", evolving("bench-evolving"), 200),
    ]
    rows, cpu = [], []
    for name, factory, ok in phases:
        rate, usage = measure(node, seconds, factory, ok)
        rows.append((name, rate))
        cpu.append((name, usage))
    baseline = rows[0][1]
    print("{:<28} {:>10} {:>11}".format("phase", "req/s", "of produce"))
    for name, rate in rows:
        print(f"{name:<28} {rate:>10,.0f} {100 * rate / baseline:>10.0f}%")
    print()
    print("CPU per phase (100% = one core):")
    for name, usage in cpu:
        print(f"  {name:<28} {usage}")
    status, data = call(port, "GET", "/registry/subjects/bench-evolving-0/versions")
    assert status == 200, data
    print()
    print(
        f"the first evolving subject holds {len(json.loads(data))} versions "
        "(each one checked BACKWARD against the one before)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per phase")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    messaging.stop_nodes_on_sigterm()
    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-registry-"))
    node = Node(tmp, args.workers)
    try:
        node.start()
        report(node, args.seconds)
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import report as page

    page.run("registry", main)
