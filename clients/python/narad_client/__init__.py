"""narad-client: a light client of the Narad ``/v1`` HTTP API (httpx only).

::

    from narad_client import Client

    with Client("http://127.0.0.1:7942", auth=("admin", "secret")) as narad:
        narad.create_topic("orders", partitions=3)
        narad.produce("orders", b'{"id": 1}', key="order-1")
        message = narad.consume("orders", wait=5)
        if message is not None:
            print(message.payload)
            narad.ack("orders", message)

:class:`AsyncClient` has the same methods as coroutines. Errors are
:class:`NaradError` subclasses by status; the retry rule is in the README.
"""

from narad_client._async import AsyncClient
from narad_client._core import VERSION
from narad_client._core import new_idempotency_key
from narad_client._errors import BadRequest
from narad_client._errors import Conflict
from narad_client._errors import Forbidden
from narad_client._errors import Gone
from narad_client._errors import NaradError
from narad_client._errors import NotFound
from narad_client._errors import PayloadTooLarge
from narad_client._errors import ServerError
from narad_client._errors import TooManyRequests
from narad_client._errors import Unauthorized
from narad_client._errors import Unavailable
from narad_client._errors import UnexpectedResponse
from narad_client._models import Message
from narad_client._models import Produced
from narad_client._models import Schema
from narad_client._sync import Client

__version__ = VERSION

__all__ = (
    "AsyncClient",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "Gone",
    "Message",
    "NaradError",
    "NotFound",
    "PayloadTooLarge",
    "Produced",
    "Schema",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
    "__version__",
    "new_idempotency_key",
)
