"""Typed errors: one class per kind of refusal, all under :class:`NaradError`.

The node answers every refusal with ``{"error": "<message>"}`` and a status
code; :func:`error_for` turns the pair into the class for that status, so a
caller catches what it can handle (``except NotFound:``) and lets the rest
go. A node that cannot be reached at all is :class:`Unavailable` with
``status`` 0.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = (
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "NaradError",
    "NotFound",
    "PayloadTooLarge",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
    "error_for",
)


class NaradError(Exception):
    """A call that did not succeed.

    Attributes:
        status: The HTTP status of the node's answer; 0 when no answer came
            (connection refused or lost, timeout).
        error: The node's ``error`` message, or what went wrong on the way.
        headers: The answer's headers (lower-case names); empty without one.
    """

    def __init__(
        self, error: str, status: int = 0, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.headers: dict[str, str] = {
            k.lower(): v for k, v in (headers or {}).items()
        }

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.error}" if self.status else self.error


class BadRequest(NaradError):
    """400: the request breaks the API's rules, or a payload or schema is
    refused (the message says what is wrong); nothing was stored."""


class Unauthorized(NaradError):
    """401: no credentials, or wrong ones."""


class Forbidden(NaradError):
    """403: the credentials do not allow this call."""


class NotFound(NaradError):
    """404: no such topic, user, schema version, child or message."""


class Conflict(NaradError):
    """409: the call conflicts with the current state (the topic exists, the
    schema history moved on, an idempotency key reused for another body...)."""


class Gone(NaradError):
    """410: the receipt handle's lease lapsed, was settled, or never existed."""


class PayloadTooLarge(NaradError):
    """413: a body over the node's limit (1 MiB)."""


class TooManyRequests(NaradError):
    """429: refused for a while (too many failed logins, say).

    Attributes:
        retry_after: Seconds the node asks to wait, if it said.
    """

    @property
    def retry_after(self) -> float | None:
        return _seconds(self.headers.get("retry-after"))


class Unavailable(NaradError):
    """503, or no answer at all (``status`` 0): the node cannot serve the call
    now and the same call may succeed later. Raised once the client's retries
    (where the call is safe to retry) are spent."""


class ServerError(NaradError):
    """Another 5xx: the node failed (507: its storage is full)."""


class UnexpectedResponse(NaradError):
    """An answer that is not the API's: a redirect (not followed), or a body
    that is not the JSON the call expects (another server at that address?)."""


_BY_STATUS: dict[int, type[NaradError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    429: TooManyRequests,
    503: Unavailable,
}


def error_for(
    status: int, error: str, headers: Mapping[str, str] | None = None
) -> NaradError:
    """The exception for an answer of ``status`` with the node's ``error``."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        if status >= 500:
            cls = ServerError
        elif 300 <= status < 400:
            cls = UnexpectedResponse
        else:  # another 4xx (408 request timeout, 415, ...)
            cls = NaradError
    return cls(error, status, headers)


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` of delay-seconds; None for none (or an HTTP date)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
