"""Bounds on schema documents and payloads (the rulebook's, for every type)."""

from __future__ import annotations

from narad.schematypes import PAYLOAD_DEPTH
from narad.schematypes import SCHEMA_DEPTH

__all__ = ("MESSAGE_LIMIT", "PAYLOAD_DEPTH", "SCHEMA_DEPTH", "SCHEMA_SIZE")

# "It is at most 256 KiB and nests at most 64 levels": the compacted text.
SCHEMA_SIZE = 256 * 1024
# Refusals of a payload are cut at 2 KiB, like JSON Schema's.
MESSAGE_LIMIT = 2048
