"""The OpenAPI 3.1 document of the HTTP API, served at ``GET /v1/openapi.json``.

Built here, in code, rather than kept as a YAML or JSON file: every bound
it states (name patterns, partition and batch limits, page sizes, password
lengths, the modes, actions and encodings) is read from the constant the
resource checks it with, so the document cannot drift from the checks.
What code cannot keep true is kept by tests: ``tests/unit/http/
test_openapi.py`` fails when a falcon route or method is missing from the
document or the document names one the app does not serve, and validates
it; ``tests/integration/test_openapi_fuzz_http.py`` runs schemathesis from
the served document against a live node (statuses and bodies conform).

The document describes the API, not its data: it is served without
credentials, and built once per process (:func:`document_bytes`).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from narad import __version__
from narad.broker.children import MAX_DELAY_MS
from narad.errors import CHALLENGE
from narad.http import json_body
from narad.http import openapi_registry
from narad.http.body import MAX_BODY
from narad.http.messages import IDEMPOTENCY_HEADER
from narad.http.messages import MAX_ACK_BATCH
from narad.http.messages import MAX_BATCH
from narad.http.messages import MAX_CONSUME_BATCH
from narad.http.messages import REPLAYED_HEADER
from narad.http.schemas import CHECKED_HEADER
from narad.http.schemas import MAX_VERSION
from narad.http.schemas import NO_CHANGE_HEADER
from narad.http.schemas import REFERENCES_HEADER
from narad.http.schemas import TRUNCATED_HEADER
from narad.http.schemas import TYPE_HEADER
from narad.http.topics import MAX_PAGE
from narad.http.topics import MAX_PARTITIONS
from narad.http.topics import MAX_PROTO_MESSAGE
from narad.http.topics import MIN_RETENTION_MS
from narad.http.users import MAX_PAGE as MAX_USER_PAGE
from narad.schema.framing import FRAMINGS
from narad.schema.modes import Mode
from narad.schematypes import ENCODINGS
from narad.security.grants import GRANTED
from narad.security.grants import MAX_GRANTS
from narad.security.grants import MAX_PATTERNS
from narad.security.grants import TOPIC_ACTIONS
from narad.security.passwords import MAX_PASSWORD
from narad.security.passwords import MIN_PASSWORD

#: Where the document is served.
PATH = "/v1/openapi.json"

#: Integers stored in the storage must be exact in Lua's doubles.
_MAX_SAFE = 2**53 - 1
#: Digits a query integer may have (``narad.http.body.query_int``).
_MAX_QUERY = 10**15 - 1
_TOPIC_NAME = "^[A-Za-z0-9._-]{1,249}$"
_ONLY_DOTS = "^[.]+$"
_USERNAME = "^[A-Za-z0-9._@-]{1,64}$"
_PATTERN = "^([A-Za-z0-9._-]{0,248}[*]|[A-Za-z0-9._-]{1,249})$"
_IDEMPOTENCY_KEY = "^[\\x21-\\x7e]{1,255}$"
_DURATION = "^([ \\t]*[0-9]{1,12}(ms|s)?[ \\t]*)?$"
_SCHEMA_TYPES = ("JSON", "AVRO", "PROTOBUF")
_OUTCOMES = (
    "acked",
    "extended",
    "released",
    "lapsed",
    "acked_ahead_full",
    "malformed",
)

_JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or ``null``, as 3.1 writes it."""
    return {"oneOf": [schema, {"type": "null"}]}


def _closed(
    properties: dict[str, Any], required: tuple[str, ...] = (), **more: Any
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    schema.update(more)
    return schema


def _int(low: int = 0, high: int = _MAX_SAFE, **more: Any) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high, **more}


# -- schemas ------------------------------------------------------------------

_TOPIC_SETTINGS = {
    "retention_ms": {
        "description": "0 keeps messages forever; else at least one hour.",
        "oneOf": [{"const": 0}, _int(MIN_RETENTION_MS)],
    },
    "visibility_timeout_ms": _int(1, description="How long a lease lasts."),
    "max_in_flight_per_partition": _int(1),
    "max_acked_ahead_per_partition": _int(1),
}

_SCHEMA_SETTINGS = {
    "schema_type": {
        "type": "string",
        "pattern": "^[A-Z][A-Z0-9_]{0,31}$",
        "examples": list(_SCHEMA_TYPES),
        "description": "The history's schema type: JSON (JSON Schema), AVRO, "
        "PROTOBUF, or one a plugin adds. Fixed once the topic has a schema.",
    },
    "encoding": {
        "enum": list(ENCODINGS),
        "description": "How payloads are written: json, or the type's binary "
        "encoding (AVRO, PROTOBUF).",
    },
    "proto_message": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_PROTO_MESSAGE,
        "description": "The full name of the Protobuf message payloads hold "
        "(shop.Order).",
    },
}

_FRAMING = {
    "enum": list(FRAMINGS),
    "default": FRAMINGS[0],
    "description": "How produced messages are framed: none, or confluent "
    "(Confluent's wire format: magic byte 0, the 4-byte big-endian global id "
    "of any version of the topic's history, then the payload that version "
    "validates: a JSON text, an Avro binary datum, or Protobuf message indexes "
    "and a binary message). A framed AVRO or PROTOBUF topic's encoding is "
    "binary. Messages are stored as sent.",
}

_MODE = {
    "enum": [m.value for m in Mode],
    "description": "A compatibility mode: how each new schema version must "
    "relate to the earlier ones.",
}

_TOPIC_RECORD = {
    "name": _ref("TopicName"),
    "partitions": _int(1, MAX_PARTITIONS),
    "retention_ms": _int(),
    "visibility_timeout_ms": _int(1),
    "max_in_flight_per_partition": _int(1),
    "max_acked_ahead_per_partition": _int(1),
    "created_at_ms": _int(),
    "schema_version": _nullable(_int(1)),
    "compatibility": _MODE,
    "schema_type": _SCHEMA_SETTINGS["schema_type"],
    "encoding": {"enum": list(ENCODINGS)},
    "framing": {"enum": list(FRAMINGS)},
    "owner": _nullable({"type": "string"}),
    "proto_message": _nullable({"type": "string"}),
    "parent": _ref("TopicName"),
    "fanout_delay_ms": _int(1, MAX_DELAY_MS),
    "children": {"type": "array", "items": _ref("TopicName")},
}
_TOPIC_REQUIRED = (
    "name",
    "partitions",
    "retention_ms",
    "visibility_timeout_ms",
    "max_in_flight_per_partition",
    "max_acked_ahead_per_partition",
    "created_at_ms",
    "schema_version",
    "compatibility",
    "schema_type",
    "encoding",
    "framing",
    "owner",
)

_GRANT = {
    "oneOf": [
        _closed(
            {
                "action": {
                    "enum": [a.value for a in GRANTED if a.value in TOPIC_ACTIONS]
                },
                "patterns": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "pattern": _PATTERN},
                    "description": "Topic names, or prefixes followed by * "
                    "(invoices.*).",
                },
            },
            ("action", "patterns"),
        ),
        _closed(
            {
                "action": {
                    "enum": [a.value for a in GRANTED if a.value not in TOPIC_ACTIONS]
                },
                "patterns": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"const": "*"},
                    "description": "The whole node's: only *.",
                },
            },
            ("action", "patterns"),
        ),
    ],
    "description": f"An action and the topics it applies to; a user holds at "
    f"most {MAX_PATTERNS} patterns in all.",
}

_PASSWORD = {"type": "string", "minLength": MIN_PASSWORD, "maxLength": MAX_PASSWORD}

SCHEMAS: dict[str, Any] = {
    "Error": _closed(
        {"error": {"type": "string", "description": "What is wrong."}},
        ("error",),
        description="Every refusal and failure.",
    ),
    "TopicName": {
        "type": "string",
        "pattern": _TOPIC_NAME,
        "not": {"pattern": _ONLY_DOTS},
        "description": "1 to 249 letters, digits, '.', '_' or '-', not only dots.",
    },
    "Username": {
        "type": "string",
        "pattern": _USERNAME,
        "not": {"pattern": _ONLY_DOTS},
    },
    "Topic": _closed(_TOPIC_RECORD, _TOPIC_REQUIRED),
    "TopicDescription": _closed(
        {
            **_TOPIC_RECORD,
            "partition_stats": {
                "type": "array",
                "items": _closed(
                    {
                        "index": _int(0, MAX_PARTITIONS - 1),
                        "oldest_offset": _int(),
                        "next_offset": _int(),
                        "in_flight": _int(),
                    },
                    ("index", "oldest_offset", "next_offset", "in_flight"),
                ),
            },
        },
        (*_TOPIC_REQUIRED, "partition_stats"),
    ),
    "TopicPage": _closed(
        {
            "topics": {"type": "array", "items": _ref("Topic")},
            "next_page_token": _nullable({"type": "string"}),
        },
        ("topics", "next_page_token"),
    ),
    "TopicCreate": _closed(
        {
            "name": _ref("TopicName"),
            "partitions": _int(
                0,
                MAX_PARTITIONS,
                default=3,
                description="0 takes the parent's count (with parent only).",
            ),
            **_TOPIC_SETTINGS,
            "compatibility": _MODE,
            "schema": {
                "description": "The first schema version (a JSON Schema, an "
                "Avro schema, or Protobuf text as a JSON string).",
                "not": {"type": "null"},
            },
            **_SCHEMA_SETTINGS,
            "framing": _FRAMING,
            "parent": _ref("TopicName"),
            "fanout_delay_ms": {
                **_int(0, MAX_DELAY_MS),
                "description": "With parent: how long copies wait in the child.",
            },
        },
        ("name",),
    ),
    "TopicAlter": _closed(
        {
            **_TOPIC_SETTINGS,
            "compatibility": _MODE,
            "schema": {
                "description": "A new schema version (never null: a schema "
                "cannot be removed).",
                "not": {"type": "null"},
            },
            **_SCHEMA_SETTINGS,
            "framing": _FRAMING,
            "schema_base_version": _int(
                0,
                description="Append only if the current version is this one "
                "(0: none yet).",
            ),
        }
    ),
    "Message": _closed(
        {
            "topic": _ref("TopicName"),
            "partition": _int(0, MAX_PARTITIONS - 1),
            "offset": _int(),
            "key": _nullable({"type": "string"}),
            "timestamp": _int(description="When it was stored, in Unix ms."),
            "receipt_handle": {
                "type": "string",
                "description": "Acks or extends the lease; absent on a replay.",
            },
            "payload_encoding": {
                "const": "base64",
                "description": "The payload was not UTF-8: payload is its base64.",
            },
            "payload": {
                "description": "The produced JSON verbatim, a JSON string when "
                "the body was UTF-8 text, or base64 (payload_encoding)."
            },
        },
        ("topic", "partition", "offset", "key", "timestamp", "payload"),
    ),
    "MessageBatch": _closed(
        {"messages": {"type": "array", "items": _ref("Message")}}, ("messages",)
    ),
    "ProduceBatch": _closed(
        {
            "messages": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "items": _ref("BatchEntry"),
            }
        },
        ("messages",),
        examples=[{"messages": [{"value": '{"id": 1}', "key": "order-1"}]}],
    ),
    "BatchEntry": {
        **_closed(
            {
                "value": {"type": "string", "description": "The payload as text."},
                "value_base64": {
                    "type": "string",
                    "contentEncoding": "base64",
                    "description": "The payload's bytes, base64.",
                },
                "key": {"type": "string"},
                "partition": _int(0, MAX_PARTITIONS - 1),
                "idempotency_key": {"type": "string", "pattern": _IDEMPOTENCY_KEY},
            }
        ),
        "oneOf": [{"required": ["value"]}, {"required": ["value_base64"]}],
    },
    "ProduceBatchResult": _closed(
        {
            "accepted": _int(description="Messages stored by this request."),
            "duplicates": _int(
                description="Messages an earlier attempt with the same "
                "idempotency key stored (present when keys were given)."
            ),
        },
        ("accepted",),
    ),
    "AckBatch": _closed(
        {
            "receipt_handles": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_ACK_BATCH,
                "items": {"type": "string"},
            },
            "extend": {
                "description": "true renews the leases, 0 gives the messages "
                "back; absent, null or false acks.",
                "oneOf": [{"type": "boolean"}, {"const": 0}, {"type": "null"}],
            },
        },
        ("receipt_handles",),
    ),
    "AckBatchResult": _closed(
        {"results": {"type": "array", "items": {"enum": list(_OUTCOMES)}}},
        ("results",),
    ),
    "Attach": _closed(
        {"child": _ref("TopicName"), "delay_ms": _int(0, MAX_DELAY_MS, default=0)},
        ("child",),
    ),
    "Children": _closed(
        {
            "parent": _ref("TopicName"),
            "children": {
                "type": "array",
                "items": _closed(
                    {
                        "name": _ref("TopicName"),
                        "delay_ms": _int(0, MAX_DELAY_MS),
                        "lag_messages": _int(),
                        "lag_complete": {"type": "boolean"},
                    },
                    ("name", "delay_ms", "lag_messages", "lag_complete"),
                ),
            },
        },
        ("parent", "children"),
    ),
    "SchemaHistory": _closed(
        {
            "topic": _ref("TopicName"),
            "current_version": _nullable(_int(1)),
            "total_bytes": _int(),
            "schema_type": {"type": "string"},
            "encoding": {"enum": list(ENCODINGS)},
            "proto_message": {"type": "string"},
            "versions": {
                "type": "array",
                "items": _closed(
                    {
                        "version": _int(1),
                        "size": _int(),
                        "schema_type": {"type": "string"},
                    },
                    ("version", "size", "schema_type"),
                ),
            },
        },
        (
            "topic",
            "current_version",
            "total_bytes",
            "schema_type",
            "encoding",
            "versions",
        ),
    ),
    "CompatibilityCheck": _closed(
        {
            "schema": {"description": "The proposed schema.", "not": {"type": "null"}},
            "against": {
                "description": "The versions to check against; the mode's by default.",
                "oneOf": [{"enum": ["latest", "all"]}, _int(1, MAX_VERSION)],
            },
            "mode": _MODE,
        },
        ("schema",),
    ),
    "CompatibilityReport": _closed(
        {
            "compatible": {"type": "boolean"},
            "mode": _MODE,
            "violations": {
                "type": "array",
                "items": _closed(
                    {
                        "pointer": {"type": "string"},
                        "keyword": {"type": "string"},
                        "message": {"type": "string"},
                        "against_version": _int(1),
                    },
                    ("pointer", "keyword", "message", "against_version"),
                ),
            },
        },
        ("compatible", "mode", "violations"),
    ),
    "Grant": _GRANT,
    "User": _closed(
        {
            "username": _ref("Username"),
            "grants": {"type": "array", "items": _ref("Grant")},
            "created_at_ms": _int(),
        },
        ("username", "grants", "created_at_ms"),
    ),
    "UserPage": _closed(
        {
            "users": {"type": "array", "items": _ref("User")},
            "next_page_token": _nullable({"type": "string"}),
        },
        ("users", "next_page_token"),
    ),
    "UserCreate": _closed(
        {
            "username": _ref("Username"),
            "password": _PASSWORD,
            "grants": {
                "type": "array",
                "maxItems": MAX_GRANTS,
                "items": _ref("Grant"),
                "default": [],
            },
        },
        ("username", "password"),
    ),
    "Grants": _closed(
        {"grants": {"type": "array", "maxItems": MAX_GRANTS, "items": _ref("Grant")}},
        ("grants",),
    ),
    "PasswordChange": _closed(
        {
            "password": _PASSWORD,
            "current_password": _nullable(
                {
                    "type": "string",
                    "maxLength": MAX_PASSWORD,
                    "description": "Needed to change one's own password.",
                }
            ),
        },
        ("password",),
    ),
    "Status": _closed({"status": {"type": "string"}}, ("status",)),
}


# -- parameters and responses -------------------------------------------------

PARAMETERS: dict[str, Any] = {
    "name": {
        "name": "name",
        "in": "path",
        "required": True,
        "description": "The topic.",
        "schema": _ref("TopicName"),
        "example": "orders",
    },
    "child": {
        "name": "child",
        "in": "path",
        "required": True,
        "description": "The child topic.",
        "schema": _ref("TopicName"),
        "example": "orders.audit",
    },
    "username": {
        "name": "username",
        "in": "path",
        "required": True,
        "schema": _ref("Username"),
        "example": "reader",
    },
    "version": {
        "name": "version",
        "in": "path",
        "required": True,
        "description": "A version number, or latest.",
        "schema": {"type": "string", "pattern": "^([0-9]+|latest)$"},
        "example": "latest",
    },
    "partition": {
        "name": "partition",
        "in": "query",
        "description": "A partition of the topic (0-based).",
        "schema": _int(0, _MAX_QUERY),
    },
    "wait": {
        "name": "wait",
        "in": "query",
        "description": "How long to wait for a message: 500ms, 10s or plain "
        "milliseconds, capped by broker.max_wait_ms.",
        "schema": {"type": "string", "pattern": _DURATION},
    },
    "idempotency_key": {
        "name": IDEMPOTENCY_HEADER,
        "in": "header",
        "description": "A retry with the same key stores nothing new.",
        "schema": {"type": "string", "pattern": _IDEMPOTENCY_KEY},
    },
}


def _param(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/parameters/{name}"}


def _page_params(high: int, token_pattern: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "limit",
            "in": "query",
            "description": f"Records per page (default 100, at most {high}).",
            "schema": _int(1, high),
        },
        {
            "name": "page_token",
            "in": "query",
            "description": "The previous page's next_page_token.",
            "schema": {"type": "string", "pattern": f"^$|{token_pattern}"},
        },
    ]


_ERRORS = {
    400: "Bad request: the message names what is wrong; nothing was written.",
    401: "No, malformed or wrong credentials.",
    403: "The credentials do not allow this.",
    404: "No such topic, user, version, child or message.",
    405: "The route does not serve this method.",
    408: "The request body arrived too slowly.",
    409: "Conflict with the stored state; the message says which.",
    410: "The lease has lapsed.",
    413: f"The request body is over {MAX_BODY} bytes.",
    415: "A Content-Encoding other than identity: bodies are never decoded.",
    429: "Too many failed logins; retry after Retry-After seconds.",
    501: "A Transfer-Encoding other than chunked.",
    503: "Temporarily unavailable: retry (Retry-After when known).",
    507: "The storage is full: nothing was stored.",
}

_HEADERS: dict[str, Any] = {
    "X-Request-ID": {
        "description": "The request's id: the client's when usable, else new.",
        "required": True,
        "schema": {"type": "string"},
    },
    "WWW-Authenticate": {
        "required": True,
        "schema": {"const": CHALLENGE},
    },
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    },
    "Location": {"required": True, "schema": {"type": "string"}},
    REPLAYED_HEADER: {
        "description": "true: an earlier attempt with the same idempotency "
        "key stored every message; nothing was stored now.",
        "schema": {"const": "true"},
    },
}


def _header(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/headers/{name}"}


def _response(
    description: str,
    schema: dict[str, Any] | None = None,
    *,
    media: str = _JSON,
    headers: tuple[str, ...] = (),
    extra_headers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description}
    all_headers = {"X-Request-ID": _header("X-Request-ID")}
    all_headers.update({name: _header(name) for name in headers})
    all_headers.update(extra_headers or {})
    response["headers"] = all_headers
    if schema is not None:
        response["content"] = {media: {"schema": schema}}
    return response


def _error(status: int) -> dict[str, Any]:
    headers: tuple[str, ...] = ()
    if status == 401:
        headers = ("WWW-Authenticate",)
    elif status in (429, 503):
        headers = ("Retry-After",)
    return _response(_ERRORS[status], _ref("Error"), headers=headers)


RESPONSES = {str(status): _error(status) for status in _ERRORS}


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(status): {"$ref": f"#/components/responses/{status}"} for status in statuses
    }


# Every authenticated request may be refused so, whatever its route.
_AUTH = (401, 403, 429)
# Every request with a body: it is read the one way (narad.http.body).
_BODY = (400, 408, 413, 415, 501)
# Every write: the storage may refuse it (narad.http.health.WriteGuard).
_WRITE = (503, 507)


def _operation(
    operation_id: str,
    summary: str,
    responses: dict[str, Any],
    errors: tuple[int, ...],
    *,
    tags: tuple[str, ...],
    parameters: list[Any] | None = None,
    body: dict[str, Any] | None = None,
    security: list[Any] | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": list(tags),
    }
    if description:
        operation["description"] = description
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = body
    if security is not None:
        operation["security"] = security
    operation["responses"] = {**responses, **_errors(*sorted(set(errors)))}
    return operation


def _head(get: dict[str, Any]) -> dict[str, Any]:
    """The HEAD twin of a GET: the same statuses and headers, no body."""
    head = copy.deepcopy(get)
    head["operationId"] = get["operationId"] + "Head"
    head["summary"] = "Headers of: " + get["summary"][0].lower() + get["summary"][1:]
    for response in head["responses"].values():
        if "$ref" in response:
            status = response["$ref"].rsplit("/", 1)[1]
            response.clear()
            response.update(copy.deepcopy(RESPONSES[status]))
        response.pop("content", None)
    return head


def _json_body(schema: str, description: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "required": True,
        "content": {_JSON: {"schema": _ref(schema)}},
    }
    if description:
        body["description"] = description
    return body


def _paths() -> dict[str, Any]:
    name = _param("name")
    topics = ("topics",)
    messages = ("messages",)
    schemas = ("schemas",)
    fanout = ("fan-out",)
    users = ("users",)
    node = ("node",)
    topic_errors = (*_AUTH, 400, 404)

    list_topics = _operation(
        "listTopics",
        "List the topics the caller's grants match, by name",
        {"200": _response("A page of topics.", _ref("TopicPage"))},
        (*_AUTH, 400, 503),
        tags=topics,
        parameters=_page_params(MAX_PAGE, _TOPIC_NAME),
    )
    describe = _operation(
        "describeTopic",
        "Describe a topic, with its partitions' offsets",
        {"200": _response("The topic.", _ref("TopicDescription"))},
        (*topic_errors, 503),
        tags=topics,
        parameters=[name],
    )
    consume = _operation(
        "consume",
        "Lease one message, or replay one by partition and offset",
        {
            "200": _response("A message.", _ref("Message")),
            "204": _response("No message within wait."),
        },
        (*topic_errors, 409, 503),
        tags=messages,
        parameters=[
            _param("wait"),
            _param("partition"),
            {
                "name": "offset",
                "in": "query",
                "description": "With partition: replay this message (no lease).",
                "schema": _int(0, _MAX_QUERY),
            },
        ],
        description="Without offset, leases the next message for the topic's "
        "visibility timeout; ack it with its receipt_handle. HEAD only replays.",
    )
    replay_head = _head(consume)
    replay_head["summary"] = "Headers of a replay by partition and offset"
    replay_head["description"] = "Only replays: a consume would lease a message."
    replay_head["parameters"] = [
        name,
        {**PARAMETERS["partition"], "required": True},
        {**consume["parameters"][2], "required": True},
    ]
    replay_head["responses"].pop("204")
    consume_batch = _operation(
        "consumeBatch",
        "Lease up to max messages",
        {
            "200": _response("The messages.", _ref("MessageBatch")),
            "204": _response("No message within wait."),
        },
        (*topic_errors, 409, 503),
        tags=messages,
        parameters=[
            {
                "name": "max",
                "in": "query",
                "description": f"At most this many (default 10, at most "
                f"{MAX_CONSUME_BATCH}).",
                "schema": _int(1, MAX_CONSUME_BATCH),
            },
            _param("wait"),
            _param("partition"),
        ],
    )
    consume_batch_head = _head(consume_batch)
    consume_batch_head["description"] = (
        "Always 400 for a topic the caller may consume: a batch consume would "
        "lease messages."
    )
    consume_batch_head["responses"].pop("200")
    consume_batch_head["responses"].pop("204")
    schema_history = _operation(
        "schemaHistory",
        "A topic's schema versions and their sizes",
        {"200": _response("The history.", _ref("SchemaHistory"))},
        (*topic_errors, 503),
        tags=schemas,
        parameters=[name],
    )
    schema_version = _operation(
        "schemaVersion",
        "One schema version, as it was registered",
        {
            "200": _response(
                "The schema document.",
                {},
                extra_headers={
                    "Narad-Schema-Version": {
                        "required": True,
                        "schema": {"type": "string", "pattern": "^[0-9]+$"},
                    },
                    TYPE_HEADER: {"required": True, "schema": {"type": "string"}},
                    REFERENCES_HEADER: {
                        "description": "The version's schema references "
                        "(registered under /registry), compact JSON; absent "
                        "when it has none.",
                        "schema": {"type": "string"},
                    },
                },
            )
        },
        (*topic_errors, 503),
        tags=schemas,
        parameters=[name, _param("version")],
    )
    children = _operation(
        "listChildren",
        "A topic's fan-out children, with their lag",
        {"200": _response("The children.", _ref("Children"))},
        (*topic_errors, 503),
        tags=fanout,
        parameters=[name],
    )
    list_users = _operation(
        "listUsers",
        "List users by name (admins)",
        {"200": _response("A page of users.", _ref("UserPage"))},
        (*_AUTH, 400, 503),
        tags=users,
        parameters=_page_params(MAX_USER_PAGE, _USERNAME),
    )
    get_user = _operation(
        "getUser",
        "A user's record (admins, or the user)",
        {"200": _response("The user.", _ref("User"))},
        (*_AUTH, 404, 503),
        tags=users,
        parameters=[_param("username")],
    )
    healthz = _operation(
        "healthz",
        "Liveness: the worker answers",
        {"200": _response("Alive.", _ref("Status"))},
        (),
        tags=node,
        security=[],
    )
    readyz = _operation(
        "readyz",
        "Readiness: the storage answers and may take writes",
        {
            "200": _response("Ready.", _ref("Status")),
            "503": _response("Not ready, and why.", _ref("Error")),
        },
        (),
        tags=node,
        security=[],
    )
    metrics = _operation(
        "metrics",
        "Prometheus metrics of the node and its topics",
        {
            "200": _response(
                "The Prometheus text format.", {"type": "string"}, media="text/plain"
            )
        },
        _AUTH,
        tags=node,
        # A user with the metrics grant (or admin on *); none when
        # metrics.public is set.
        security=[{"basic": []}, {}],
        description="Needs a user with the metrics grant (or admin on *) "
        "unless metrics.public is set.",
    )
    openapi = _operation(
        "openapi",
        "This document",
        {"200": _response("The OpenAPI document.", {"type": "object"})},
        (),
        tags=node,
        security=[],
    )

    return {
        "/v1/topics": {
            "get": list_topics,
            "head": _head(list_topics),
            "post": _operation(
                "createTopic",
                "Create a topic (as a fan-out child with parent)",
                {"201": _response("Created.", _ref("Topic"), headers=("Location",))},
                (*_AUTH, *_BODY, 404, 409, *_WRITE),
                tags=topics,
                body=_json_body("TopicCreate"),
            ),
        },
        "/v1/topics/{name}": {
            "get": describe,
            "head": _head(describe),
            "patch": _operation(
                "alterTopic",
                "Alter a topic's settings, mode or schema",
                {"200": _response("The topic as altered.", _ref("Topic"))},
                (*topic_errors, *_BODY, 409, *_WRITE),
                tags=topics,
                parameters=[name],
                body=_json_body("TopicAlter"),
            ),
            "delete": _operation(
                "deleteTopic",
                "Delete a topic, its messages and schema history",
                {"204": _response("Deleted; its children are detached.")},
                (*topic_errors, 409, *_WRITE),
                tags=topics,
                parameters=[name],
            ),
        },
        "/v1/topics/{name}/produce": {
            "post": _operation(
                "produce",
                "Produce one message: the body, as sent",
                {
                    "202": _response(
                        "Stored (fsynced, or committed by a majority).",
                        headers=(REPLAYED_HEADER,),
                    )
                },
                (*topic_errors, *_BODY, 409, *_WRITE),
                tags=messages,
                parameters=[
                    name,
                    {
                        "name": "key",
                        "in": "query",
                        "description": "The message's key: the partition is "
                        "chosen by it (else round robin).",
                        "schema": {"type": "string"},
                    },
                    _param("partition"),
                    _param("idempotency_key"),
                ],
                body={
                    "required": False,
                    "description": "The message, at most 1 MiB. On a topic "
                    "with a schema it must be a payload the schema accepts.",
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        },
                        _JSON: {"schema": {}},
                        "text/plain": {"schema": {"type": "string"}},
                    },
                },
            )
        },
        "/v1/topics/{name}/produce/batch": {
            "post": _operation(
                "produceBatch",
                "Produce up to 1000 messages, all or nothing",
                {
                    "202": _response(
                        "Stored.",
                        _ref("ProduceBatchResult"),
                        headers=(REPLAYED_HEADER,),
                    )
                },
                (*topic_errors, *_BODY, 409, *_WRITE),
                tags=messages,
                parameters=[name, _param("idempotency_key")],
                body=_json_body("ProduceBatch"),
            )
        },
        "/v1/topics/{name}/consume": {
            "get": {**consume, "parameters": [name, *consume["parameters"]]},
            "head": replay_head,
        },
        "/v1/topics/{name}/consume/batch": {
            "get": {
                **consume_batch,
                "parameters": [name, *consume_batch["parameters"]],
            },
            "head": {
                **consume_batch_head,
                "parameters": [name, *consume_batch_head["parameters"]],
            },
        },
        "/v1/topics/{name}/ack": {
            "post": _operation(
                "ack",
                "Ack a message, extend its lease, or give it back",
                {"204": _response("Done (an ack again of the same handle too).")},
                (*topic_errors, 409, 410, *_WRITE),
                tags=messages,
                parameters=[
                    name,
                    {
                        "name": "receipt_handle",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
                    {
                        "name": "extend",
                        "in": "query",
                        "description": "true renews the lease, 0 gives the "
                        "message back; absent or false acks.",
                        "schema": {"enum": ["", "false", "true", "0"]},
                    },
                ],
            )
        },
        "/v1/topics/{name}/ack/batch": {
            "post": _operation(
                "ackBatch",
                "Ack, extend or give back many leases; one outcome each",
                {"200": _response("The outcomes, in order.", _ref("AckBatchResult"))},
                (*topic_errors, *_BODY, *_WRITE),
                tags=messages,
                parameters=[name],
                body=_json_body("AckBatch"),
            )
        },
        "/v1/topics/{name}/children": {
            "get": children,
            "head": _head(children),
            "post": _operation(
                "attachChild",
                "Attach a topic as a fan-out child",
                {"200": _response("The parent's record.", _ref("Topic"))},
                (*topic_errors, *_BODY, 409, *_WRITE),
                tags=fanout,
                parameters=[name],
                body=_json_body("Attach"),
            ),
        },
        "/v1/topics/{name}/children/{child}": {
            "delete": _operation(
                "detachChild",
                "Detach a child",
                {"204": _response("Detached.")},
                (*topic_errors, 409, *_WRITE),
                tags=fanout,
                parameters=[name, _param("child")],
            )
        },
        "/v1/topics/{name}/schemas": {
            "get": schema_history,
            "head": _head(schema_history),
        },
        "/v1/topics/{name}/schemas/compatibility": {
            "post": _operation(
                "checkCompatibility",
                "Would this schema be accepted? Every violation; nothing stored",
                {
                    "200": _response(
                        "The report.",
                        _ref("CompatibilityReport"),
                        extra_headers={
                            CHECKED_HEADER: {"schema": {"type": "string"}},
                            NO_CHANGE_HEADER: {"schema": {"const": "true"}},
                            TRUNCATED_HEADER: {"schema": {"const": "true"}},
                        },
                    )
                },
                (*topic_errors, *_BODY, 409, 503),
                tags=schemas,
                parameters=[name],
                body=_json_body("CompatibilityCheck"),
            )
        },
        "/v1/topics/{name}/schemas/{version}": {
            "get": schema_version,
            "head": _head(schema_version),
        },
        "/v1/users": {
            "get": list_users,
            "head": _head(list_users),
            "post": _operation(
                "createUser",
                "Create a user (admins)",
                {"201": _response("Created.", _ref("User"), headers=("Location",))},
                (*_AUTH, *_BODY, 409, *_WRITE),
                tags=users,
                body=_json_body("UserCreate"),
            ),
        },
        "/v1/users/{username}": {
            "get": get_user,
            "head": _head(get_user),
            "delete": _operation(
                "deleteUser",
                "Delete a user (admins)",
                {"204": _response("Deleted.")},
                (*_AUTH, 404, 409, *_WRITE),
                tags=users,
                parameters=[_param("username")],
            ),
        },
        "/v1/users/{username}/grants": {
            "put": _operation(
                "replaceGrants",
                "Replace a user's grants (admins)",
                {"200": _response("The user.", _ref("User"))},
                (*_AUTH, *_BODY, 404, 409, *_WRITE),
                tags=users,
                parameters=[_param("username")],
                body=_json_body("Grants"),
            )
        },
        "/v1/users/{username}/password": {
            "put": _operation(
                "setPassword",
                "Change a password (one's own, or any as an admin)",
                {"204": _response("Changed.")},
                (*_AUTH, *_BODY, 404, 409, *_WRITE),
                tags=users,
                parameters=[_param("username")],
                body=_json_body("PasswordChange"),
            )
        },
        "/healthz": {"get": healthz, "head": _head(healthz)},
        "/readyz": {"get": readyz, "head": _head(readyz)},
        "/metrics": {"get": metrics, "head": _head(metrics)},
        PATH: {"get": openapi, "head": _head(openapi)},
    }


def document() -> dict[str, Any]:
    """A fresh copy of the document, as a dict."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Narad",
            "version": __version__,
            "summary": "An HTTP message broker with schemas",
            "description": "Producers POST raw bodies to topics; consumers "
            "lease one message at a time, ack it, and can replay by offset. "
            'Every error is JSON, {"error": "<message>"}.',
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "topics"},
            {"name": "messages"},
            {"name": "schemas"},
            {"name": "fan-out"},
            {"name": "users"},
            {"name": "node", "description": "Probes, metrics and this document."},
            {
                "name": openapi_registry.TAG,
                "description": "Confluent Schema Registry's REST API over the "
                "same histories (docs/registry.md).",
            },
        ],
        "security": [{"basic": []}],
        "paths": {**_paths(), **openapi_registry.paths()},
        "components": {
            "securitySchemes": {
                "basic": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "A stored user's name and password, UTF-8.",
                }
            },
            "schemas": copy.deepcopy({**SCHEMAS, **openapi_registry.SCHEMAS}),
            "parameters": copy.deepcopy(PARAMETERS),
            "headers": copy.deepcopy(_HEADERS),
            "responses": copy.deepcopy(RESPONSES),
        },
    }


@functools.cache
def document_bytes() -> bytes:
    """The served body: the document as UTF-8 JSON, made once."""
    return json_body(document())


class OpenAPI:
    """``GET /v1/openapi.json``: no credentials needed (it describes the
    API, not its data; the middleware leaves it public)."""

    def on_get(self, req, resp) -> None:
        resp.data = document_bytes()

    on_head = on_get
