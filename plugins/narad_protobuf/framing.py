"""Framed Protobuf messages: Confluent's message indexes, then the message.

After Confluent's magic byte and schema id (read by
:mod:`narad.schema.framing`) a Protobuf message carries the path to its
message type in the schema's main file: a zigzag varint count, then that
many zigzag varint indexes, the first into the file's top-level messages
and each next one into the previous one's nested messages. A count of 0 (a
single ``0`` byte, what Confluent's serializers write for the file's first
message) means ``[0]``. The rest is the message in the binary encoding,
checked as :mod:`narad_protobuf.binary` checks a topic's payloads.

Messages are indexed in the order the stored version lists them: the order
the registered file declared them (:attr:`~narad_protobuf.schema.
ProtobufSchema.declared`; versions stored before that kept name order), the
file Confluent's deserializers are served (``GET /registry/schemas/ids/{id}
?format=serialized``), so indexes a client took from its own file name the
same message.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor

from narad.caches import native_lock
from narad_protobuf.binary import MAX_DEPTH
from narad_protobuf.binary import BinaryValidator
from narad_protobuf.errors import ProtobufPayloadError
from narad_protobuf.schema import ProtobufSchema

__all__ = ("FramedValidator", "main_file", "read_indexes")

#: The most message types a framed validator keeps checkers of: a file
#: declares few, and a hostile producer cannot grow it past this.
MAX_PLANS = 64
_MAX_VARINT = 10


def main_file(schema: ProtobufSchema) -> descriptor_pb2.FileDescriptorProto:
    """The stored file that declares the topic's message (the one whose
    messages the indexes count), or the main file of a schema without one."""
    name = schema.main or schema.descriptor.file.name
    files = schema.declared if schema.declared is not None else schema.files
    for file in files.file:
        if file.name == name:
            return file
    raise LookupError(name)  # pragma: no cover - the pool was built from them


def read_indexes(data: bytes) -> tuple[tuple[int, ...], int]:
    """The message indexes at the start of ``data`` and where the message
    starts.

    Raises:
        ProtobufPayloadError: the indexes are cut short, a varint overlong,
            the count negative or deeper than messages nest, or an index
            negative.
    """
    count, pos = _zigzag(data, 0, "the message indexes' count")
    if count == 0:
        return (0,), pos
    if count < 0 or count > MAX_DEPTH:
        raise ProtobufPayloadError(
            f"payload's message indexes: a count of {count} (at byte 0) is no "
            f"path to a message (1 to {MAX_DEPTH} indexes)",
            offset=0,
        )
    indexes = []
    for number in range(count):
        start = pos
        index, pos = _zigzag(data, pos, f"message index {number + 1} of {count}")
        if index < 0:
            raise ProtobufPayloadError(
                f"payload's message indexes: index {index} (at byte {start}) "
                "is negative",
                offset=start,
            )
        indexes.append(index)
    return tuple(indexes), pos


def _zigzag(data: bytes, pos: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise ProtobufPayloadError(
                f"payload's message indexes are cut short: {what} (at byte "
                f"{start}) runs past the end; a framed Protobuf message holds "
                "Confluent's message indexes before the message",
                offset=start,
            )
        if pos - start >= _MAX_VARINT:
            raise ProtobufPayloadError(
                f"payload's message indexes: {what} (at byte {start}) is a "
                "varint longer than 10 bytes",
                offset=start,
            )
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return (result >> 1) ^ -(result & 1), pos


class FramedValidator:
    """Checks what follows a framed message's schema id against one stored
    version: the indexes, then the message they name."""

    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema
        self.file = main_file(schema)
        self._plans: dict[tuple[int, ...], BinaryValidator] = {}
        self._lock = native_lock()

    def validate(self, payload: bytes) -> None:
        indexes, offset = read_indexes(payload)
        checker = self._checker(indexes)
        checker.validate(memoryview(payload)[offset:].tobytes())

    def _checker(self, indexes: tuple[int, ...]) -> BinaryValidator:
        with self._lock:
            found = self._plans.get(indexes)
        if found is not None:
            return found
        checker = BinaryValidator(self._descriptor(indexes))
        with self._lock:
            if len(self._plans) < MAX_PLANS:
                self._plans[indexes] = checker
        return checker

    def _descriptor(self, indexes: tuple[int, ...]) -> Descriptor:
        messages = list(self.file.message_type)
        path: list[str] = [self.file.package] if self.file.package else []
        where = f"the file's {len(messages)} top-level message(s)"
        for index in indexes:
            if index >= len(messages):
                shown = list(indexes)
                raise ProtobufPayloadError(
                    f"payload's message indexes {shown} name no message: index "
                    f"{index} is past {where}"
                )
            message = messages[index]
            path.append(message.name)
            messages = list(message.nested_type)
            where = f"{'.'.join(path)}'s {len(messages)} nested message(s)"
        return self.schema.pool.FindMessageTypeByName(".".join(path))
