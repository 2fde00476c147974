"""Per-message validation of an order message by narad_protobuf, beside the
protobuf runtime's own parse of the same bytes, in the same run.

    .venv/bin/python bench/protobuf.py [--seconds 1.0]

Prints microseconds per message (best of five rounds) for binary and JSON
payloads, and what registering the schema costs (compiling the .proto in its
subprocess, loading the stored compiled form, a compatibility check).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf import message_factory
from google.protobuf.internal import api_implementation

from narad_protobuf import check
from narad_protobuf import parse_schema

ORDER = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  string order_id = 1;
  string customer_id = 2;
  repeated Line lines = 3;
  Money total = 4;
  google.protobuf.Timestamp placed_at = 5;
  Status status = 6;
  map<string, string> labels = 7;
  Address ship_to = 8;

  message Line { string sku = 1; int32 qty = 2; Money price = 3; }
  message Money { string currency = 1; int64 units = 2; int32 nanos = 3; }
  message Address {
    string street = 1; string city = 2; string zip = 3; string country = 4;
  }
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
}
"""


def per_call(fn: Callable[[], object], seconds: float) -> float:
    """Best of five rounds, in microseconds per call."""
    n = 1
    while True:  # calibrate to about a fifth of the time per round
        start = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - start
        if took > seconds / 5 or n > 1 << 24:
            break
        n *= 2
    best = took / n
    for _ in range(4):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def order_message() -> bytes:
    """The order message, serialized (what a PROTOBUF topic's producer sends)."""
    schema = parse_schema(ORDER)
    return _order(
        message_factory.GetMessageClass(schema.descriptor)
    ).SerializeToString()


def _order(cls: Any) -> Any:
    order = cls(order_id="o-20240101-0001", customer_id="c-42", status=1)
    for i in range(3):
        line = order.lines.add(sku=f"sku-{i:04}", qty=i + 1)
        line.price.currency, line.price.units = "EUR", 10 + i
    order.total.currency, order.total.units, order.total.nanos = "EUR", 36, 500_000_000
    order.placed_at.seconds = 1_704_067_200
    order.labels["channel"] = "web"
    order.ship_to.street, order.ship_to.city = "1 Main St", "Springfield"
    order.ship_to.zip, order.ship_to.country = "12345", "US"
    return order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per figure")
    figures(parser.parse_args().seconds)


def figures(seconds: float = 1.0) -> None:
    """Print every figure, each measured for about ``seconds``."""
    schema = parse_schema(ORDER)
    cls = message_factory.GetMessageClass(schema.descriptor)
    order = _order(cls)
    binary = order.SerializeToString()
    text = json_format.MessageToJson(order, indent=None)
    json_bytes = text.encode()

    schema.validate(binary)
    schema.validate(json_bytes, "json")

    def runtime_parse() -> None:
        cls.FromString(binary)

    def runtime_json() -> None:
        json_format.Parse(text, cls())

    rows = [
        (
            "binary",
            len(binary),
            per_call(lambda: schema.validate(binary), seconds),
            per_call(runtime_parse, seconds),
            "FromString",
        ),
        (
            "json",
            len(json_bytes),
            per_call(lambda: schema.validate(json_bytes, "json"), seconds),
            per_call(runtime_json, seconds),
            "json_format.Parse",
        ),
    ]
    print(f"protobuf {api_implementation.Type()} runtime; order message")
    head = ("encoding", "bytes", "narad us", "runtime us", "ratio", "runtime call")
    print("{:<8} {:>6} {:>9} {:>11} {:>6} {}".format(*head))
    for encoding, size, ours, theirs, call in rows:
        ratio = ours / theirs
        print(
            f"{encoding:<8} {size:>6} {ours:>9.2f} {theirs:>11.2f} {ratio:>6.2f} {call}"
        )

    start = time.perf_counter()
    parse_schema(ORDER)
    compile_ms = (time.perf_counter() - start) * 1e3
    load_us = per_call(lambda: parse_schema(schema.compiled), seconds)
    grown = parse_schema(
        ORDER.replace("string zip = 3;", "string zip = 3; string notes = 5;")
    )
    check_us = per_call(lambda: check(schema, grown), seconds)
    print(
        f"register: compile .proto {compile_ms:.1f} ms (subprocess), "
        f"load compiled form {load_us:.0f} us, compatibility check {check_us:.0f} us"
    )


if __name__ == "__main__":
    main()
