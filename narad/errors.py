"""Narad's exceptions.

Errors a client can cause subclass :class:`NaradError`; each carries the HTTP
status it maps to, and the HTTP layer turns it into ``{"error": message}``
with a single error handler. Errors of the operator's making (configuration,
plugins) and of the infrastructure (storage) stand apart: they are not the
client's fault and never become a 4xx.
"""

from __future__ import annotations


class NaradError(Exception):
    """A request Narad refuses; ``str(error)`` is the message clients see."""

    status = 400
    prefix = ""

    def __init__(self, message: str) -> None:
        super().__init__(self.prefix + message)
        self.message = self.prefix + message


class InvalidArgument(NaradError):
    status = 400
    prefix = "invalid argument: "


class InvalidPayload(InvalidArgument):
    """A produced body a topic's schema refuses (or that is not one JSON text)."""


class InvalidSchema(InvalidArgument):
    """A schema document the registration rules refuse."""


class IncompatibleSchema(InvalidArgument):
    """A schema change that could refuse a message the previous version accepted."""


class Unauthorized(NaradError):
    status = 401


class Forbidden(NaradError):
    status = 403


class NotFound(NaradError):
    status = 404


class TopicNotFound(NotFound):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} not found")


class Conflict(NaradError):
    status = 409


class TopicExists(Conflict):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} already exists")


class SchemaVersionConflict(Conflict):
    def __init__(self) -> None:
        super().__init__("schema version conflict")


class LeaseGone(NaradError):
    status = 410


class PayloadTooLarge(NaradError):
    status = 413


class Unavailable(NaradError):
    status = 503


class CapacityBusy(Unavailable):
    def __init__(self) -> None:
        super().__init__("schema: validation capacity busy, retry")


# -- Not the client's doing ---------------------------------------------------


class InvalidConfiguration(Exception):
    """A setting Narad cannot start with; the message names it in backticks."""


class PluginError(Exception):
    """A plugin that cannot be loaded or that conflicts with another."""


class PluginConflict(PluginError):
    """Two plugins claim the same key (draft URI, format, keyword, scheme)."""


class StorageError(Exception):
    """The storage server could not be reached, even after retrying."""


class StorageFull(StorageError):
    """The storage refused a write for memory (over ``maxmemory``): nothing stored."""
