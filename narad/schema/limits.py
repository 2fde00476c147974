"""How deep schema documents and payloads may nest (the rulebook's limits)."""

from __future__ import annotations

__all__ = ("PAYLOAD_DEPTH", "SCHEMA_DEPTH")

# "It is at most 256 KiB and nests at most 64 levels."
SCHEMA_DEPTH = 64
# "Payloads nest at most 256 levels of objects and arrays."
PAYLOAD_DEPTH = 256
