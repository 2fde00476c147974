"""Confluent Schema Registry's errors, and how every refusal reads under
``/registry``.

Confluent's clients read an error as ``{"error_code": 40401, "message":
"..."}``: the code's first three digits are the HTTP status (a code of three
digits is the status itself). The errors here are Narad errors of the usual
families (so :data:`narad.app.STATUS` knows them); :func:`confluent` gives
the status, code and message of any refusal met under ``/registry``, Narad's
own included (a topic's budget, a capacity slot, credentials).
"""

from __future__ import annotations

from narad.errors import Conflict
from narad.errors import Forbidden
from narad.errors import IncompatibleSchema
from narad.errors import InvalidArgument
from narad.errors import InvalidSchema
from narad.errors import NaradError
from narad.errors import NotFound
from narad.errors import PayloadTooLarge
from narad.errors import RequestTimeout
from narad.errors import SchemaVersionNotFound
from narad.errors import TooManyRequests
from narad.errors import TopicNotFound
from narad.errors import Unauthorized
from narad.errors import Unavailable
from narad.errors import UnknownMode
from narad.quoting import quote

#: Confluent's codes, by what they say.
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_CONFIG_NOT_FOUND = 40408
INCOMPATIBLE = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY = 42203
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
UNAUTHORIZED = 40101
FORBIDDEN = 40301
STORE_ERROR = 50001
TIMEOUT = 50002


class RegistryError(NaradError):
    """A refusal with a Confluent code of its own (``error_code``)."""

    prefix = ""
    error_code = 0


class SubjectNotFound(RegistryError, NotFound):
    error_code = SUBJECT_NOT_FOUND

    def __init__(self, subject: str) -> None:
        self.subject = subject
        # Quoted as every name a client sent is: cut, escapes shown.
        super().__init__(f"Subject {quote(subject)} not found.")


class VersionNotFound(RegistryError, NotFound):
    error_code = VERSION_NOT_FOUND

    def __init__(self, subject: str, version: int | str) -> None:
        self.subject, self.version = subject, version
        super().__init__(f"Version {version} not found in subject '{subject}'.")


class SchemaNotFound(RegistryError, NotFound):
    error_code = SCHEMA_NOT_FOUND

    def __init__(self, detail: str = "Schema not found") -> None:
        super().__init__(detail)


class SubjectSoftDeleted(RegistryError, NotFound):
    error_code = SUBJECT_SOFT_DELETED

    def __init__(self, subject: str) -> None:
        self.subject = subject
        super().__init__(
            f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
            "permanently"
        )


class SubjectNotSoftDeleted(RegistryError, NotFound):
    error_code = SUBJECT_NOT_SOFT_DELETED

    def __init__(self, subject: str) -> None:
        self.subject = subject
        super().__init__(
            f"Subject '{subject}' was not deleted first before being deleted "
            "permanently"
        )


class VersionSoftDeleted(RegistryError, NotFound):
    error_code = VERSION_SOFT_DELETED

    def __init__(self, subject: str, version: int) -> None:
        self.subject, self.version = subject, version
        super().__init__(
            f"Version {version} of subject '{subject}' was soft deleted. Set "
            "permanent=true to delete permanently"
        )


class VersionNotSoftDeleted(RegistryError, NotFound):
    error_code = VERSION_NOT_SOFT_DELETED

    def __init__(self, subject: str, version: int) -> None:
        self.subject, self.version = subject, version
        super().__init__(
            f"Version {version} of subject '{subject}' was not deleted first "
            "before being deleted permanently"
        )


class SubjectConfigNotFound(RegistryError, NotFound):
    error_code = SUBJECT_CONFIG_NOT_FOUND

    def __init__(self, subject: str) -> None:
        self.subject = subject
        super().__init__(
            f"Subject '{subject}' does not have subject-level compatibility configured"
        )


class InvalidRegistrySchema(RegistryError, InvalidArgument):
    error_code = INVALID_SCHEMA


class InvalidVersion(RegistryError, InvalidArgument):
    error_code = INVALID_VERSION

    def __init__(self, version: str) -> None:
        self.version = version
        super().__init__(
            f"The specified version '{version[:100]}' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"'
        )


class InvalidCompatibilityLevel(RegistryError, InvalidArgument):
    error_code = INVALID_COMPATIBILITY

    def __init__(self, level: object, levels: list[str]) -> None:
        shown = level if isinstance(level, str) else type(level).__name__
        super().__init__(
            f"Invalid compatibility level {str(shown)[:100]!r}: valid levels are "
            + ", ".join(levels)
        )


class TopicHistoryAppendOnly(RegistryError, Conflict):
    """A delete of a topic's subject (or of one of its versions)."""

    error_code = OPERATION_NOT_PERMITTED

    def __init__(self, subject: str, topic: str) -> None:
        self.subject, self.topic = subject, topic
        super().__init__(
            f"Subject '{subject}' is the schema history of topic {topic}, which "
            "is append-only: its versions cannot be deleted. To delete the "
            f"history, delete the topic (DELETE /v1/topics/{topic})"
        )


class ReferenceExists(RegistryError, InvalidArgument):
    """A delete of a version other versions reference (Confluent's 42206)."""

    error_code = REFERENCE_EXISTS

    def __init__(self, subject: str, version: int) -> None:
        self.subject, self.version = subject, version
        super().__init__(
            "One or more references exist to the schema "
            f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}."
        )


class IncompatibleWithEarlier(RegistryError, Conflict):
    """A registration the subject's mode refuses (Confluent's 409)."""

    error_code = INCOMPATIBLE

    def __init__(self, subject: str, messages: list[str]) -> None:
        self.subject, self.messages = subject, messages
        listed = "; ".join(messages[:8])
        super().__init__(
            "Schema being registered is incompatible with an earlier schema for "
            f"subject '{subject}', details: [{listed}]"
        )


def status_of_code(code: int) -> int:
    """The HTTP status of a Confluent code (40401: 404; 409: 409)."""
    while code >= 1000:
        code //= 10
    return code


def confluent(exc: Exception, status: int) -> tuple[int, int, str]:
    """The status, Confluent code and message a refusal answers with under
    ``/registry``; ``status`` is the one it has under ``/v1``."""
    # Narad's "invalid argument: " lead-in is not Confluent's: the detail.
    message = getattr(exc, "detail", "") or getattr(exc, "message", "")
    message = message or str(exc) or "error"
    if isinstance(exc, RegistryError):
        return status_of_code(exc.error_code), exc.error_code, message
    if isinstance(exc, IncompatibleSchema):
        listed = "; ".join(str(f) for f in exc.findings[:8])
        return (
            409,
            INCOMPATIBLE,
            "Schema being registered is incompatible with an earlier schema, "
            f"details: [{listed}]",
        )
    if isinstance(exc, InvalidSchema):
        return 422, INVALID_SCHEMA, message
    if isinstance(exc, UnknownMode):
        return 422, INVALID_COMPATIBILITY, message
    if isinstance(exc, SchemaVersionNotFound):
        return 404, VERSION_NOT_FOUND, message
    if isinstance(exc, TopicNotFound):
        return 404, SUBJECT_NOT_FOUND, message
    if isinstance(exc, Unauthorized):
        return 401, UNAUTHORIZED, message
    if isinstance(exc, Forbidden):
        return 403, FORBIDDEN, message
    if isinstance(exc, TooManyRequests):
        return 429, 42901, message
    if isinstance(exc, Unavailable):
        return status, TIMEOUT, message
    if isinstance(exc, PayloadTooLarge | RequestTimeout):
        return status, status, message
    if isinstance(exc, InvalidArgument):
        return 422, 422, message
    if status >= 500:
        return status, STORE_ERROR, message
    return status, status, message
