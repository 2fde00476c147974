"""Narad: an HTTP message broker whose topics enforce JSON Schemas."""

from narad.hookspecs import hookimpl

__all__ = ("__version__", "hookimpl")

__version__ = "0.1.0"
