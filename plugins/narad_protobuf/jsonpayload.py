"""JSON payloads: one JSON text in the Protobuf JSON mapping of the message.

The text must be what Narad reads as one JSON text (strict UTF-8, no
byte-order mark, not empty: :func:`narad.jsontext.decode`), with no
key written twice, no ``NaN``/``Infinity`` literals (the mapping spells them
as strings) and at most :data:`MAX_DEPTH` levels of nesting, checked on the
raw bytes before anything is built. The value is then parsed by the
``protobuf`` runtime's own JSON mapping (``json_format.ParseDict``) into the
message class built from the schema's descriptors: a field the message does
not declare (by its JSON name or its proto name), a value of the wrong type
or out of range, two members of one ``oneof``, a bad enum name, timestamp or
base64 are refused, naming the field. Missing fields pass, as in binary.

A refusal also carries a JSON pointer to the offending member when the
payload is small enough (:data:`LOCATE_BYTES`) to look for it: the runtime
names the field but not the array index or map key.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pool import DescriptorPool

from narad.jsontext import JSONTextError
from narad.jsontext import decode
from narad.jsontext import nesting_depth_exceeds
from narad_protobuf.errors import ProtobufPayloadError

__all__ = ("LOCATE_BYTES", "MAX_DEPTH", "JsonValidator")

#: Deepest nesting of JSON objects and arrays (the runtime's recursion limit
#: for messages is the same).
MAX_DEPTH = 100

#: Payloads up to this size get a JSON pointer in a refusal; locating re-parses
#: parts of the payload, so larger ones get the runtime's words alone.
LOCATE_BYTES = 64 * 1024


class _Refused(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"key {json.dumps(key)} is written twice")
            seen.add(key)
    return out


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON")


class JsonValidator:
    """Checks JSON payloads against one message type (module docstring)."""

    def __init__(self, descriptor: Descriptor, pool: DescriptorPool) -> None:
        self.message_name = descriptor.full_name
        self._descriptor = descriptor
        self._pool = pool
        self._cls = message_factory.GetMessageClass(descriptor)

    def validate(self, payload: bytes) -> None:
        """Return if ``payload`` is the message in the Protobuf JSON mapping.

        Raises:
            ProtobufPayloadError: naming the field and, for small payloads,
                its JSON pointer.
        """
        prefix = f"payload is not a {self.message_name} in the Protobuf JSON mapping"
        try:
            text = decode(payload)
        except JSONTextError as exc:
            raise ProtobufPayloadError(f"{prefix}: it is not JSON: {exc}") from None
        if nesting_depth_exceeds(payload, MAX_DEPTH):
            raise ProtobufPayloadError(
                f"{prefix}: it nests deeper than {MAX_DEPTH} levels"
            )
        try:
            value = json.loads(
                text, object_pairs_hook=_unique, parse_constant=_constant
            )
        except _Refused as exc:
            raise ProtobufPayloadError(f"{prefix}: {exc}") from None
        except ValueError as exc:
            raise ProtobufPayloadError(f"{prefix}: it is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ProtobufPayloadError(f"{prefix}: a message is a JSON object")
        try:
            self._parse(value, self._cls)
        except json_format.ParseError as exc:
            pointer = ""
            if len(payload) <= LOCATE_BYTES:
                pointer = _locate(value, self._descriptor, self._pool, "")
            where = f" at {pointer}" if pointer else ""
            words = " ".join(str(exc).split())
            raise ProtobufPayloadError(
                f"{prefix}{where}: {words}", path=pointer
            ) from None

    def _parse(self, value: Any, cls: Any) -> None:
        try:
            json_format.ParseDict(
                value, cls(), descriptor_pool=self._pool, max_recursion_depth=MAX_DEPTH
            )
        except RecursionError:
            raise json_format.ParseError("nests too deep") from None


def _fails(value: Any, descriptor: Descriptor, pool: DescriptorPool) -> bool:
    try:
        json_format.ParseDict(
            value,
            message_factory.GetMessageClass(descriptor)(),
            descriptor_pool=pool,
            max_recursion_depth=MAX_DEPTH,
        )
    except (json_format.ParseError, RecursionError):
        return True
    return False


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _locate(
    value: dict[str, Any], descriptor: Descriptor, pool: DescriptorPool, at: str
) -> str:
    """The JSON pointer of the innermost member that fails on its own."""
    if descriptor.full_name.startswith("google.protobuf."):
        return at  # well-known types have their own JSON forms
    by_name = {}
    for fd in descriptor.fields:
        by_name[fd.json_name] = fd
        by_name[fd.name] = fd
    for key, member in value.items():
        here = f"{at}/{_escape(key)}"
        fd = by_name.get(key)
        if fd is None:
            return here
        if not _fails({key: member}, descriptor, pool):
            continue
        sub = fd.message_type
        if sub is None or member is None:
            return here
        if sub.GetOptions().map_entry:
            value_type = sub.fields_by_name["value"].message_type
            if isinstance(member, dict):
                for map_key, item in member.items():
                    if not _fails({key: {map_key: item}}, descriptor, pool):
                        continue
                    if isinstance(item, dict) and value_type is not None:
                        return _locate(
                            item, value_type, pool, f"{here}/{_escape(map_key)}"
                        )
                    return f"{here}/{_escape(map_key)}"
            return here
        if fd.is_repeated and isinstance(member, list):
            for index, item in enumerate(member):
                if not isinstance(item, dict) or _fails(item, sub, pool):
                    if isinstance(item, dict):
                        return _locate(item, sub, pool, f"{here}/{index}")
                    return f"{here}/{index}"
            return here
        if isinstance(member, dict):
            return _locate(member, sub, pool, here)
        return here
    return at
