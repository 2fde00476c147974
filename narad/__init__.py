"""Narad: an HTTP message broker whose topics enforce JSON Schemas."""

from narad import _datastack
from narad.hookspecs import hookimpl

__all__ = ("__version__", "hookimpl")

__version__ = "0.1.0"

# Process-wide, before any validation or request greenlet: freed frame-stack
# chunks are reused instead of unmapped (narad/_datastack.c says why).
_datastack.install()
