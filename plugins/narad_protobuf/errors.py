"""The refusals of the Protobuf schema type.

Both are :class:`narad.errors.InvalidArgument` (400) subclasses, so the
schema-type hook can let them through unchanged: their ``detail`` is the
sentence a client sees after ``invalid argument: ``.
"""

from __future__ import annotations

from narad.errors import InvalidPayload
from narad.errors import InvalidSchema


class ProtobufSchemaError(InvalidSchema):
    """A schema string that is not a Protobuf schema Narad registers.

    Attributes:
        line: 1-based line of a ``.proto`` syntax or type error, else None.
        column: 1-based column of that error, else None.
    """

    def __init__(
        self, detail: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        super().__init__(detail)
        self.line = line
        self.column = column


class ProtobufPayloadError(InvalidPayload):
    """A payload that does not decode as the topic's message.

    Attributes:
        offset: Byte offset in a binary payload where decoding failed.
        path: Where it failed: field numbers (binary, ``3.1``) or a JSON
            pointer into the payload (json).
    """

    def __init__(
        self, detail: str, *, offset: int | None = None, path: str = ""
    ) -> None:
        super().__init__(detail)
        self.offset = offset
        self.path = path
