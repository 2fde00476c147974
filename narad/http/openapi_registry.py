"""The ``/registry`` part of the OpenAPI document (:mod:`narad.http.openapi`):
Confluent Schema Registry's routes (:mod:`narad.http.registry`).

Kept apart from the ``/v1`` part because its shapes are Confluent's, not
Narad's: answers in ``application/vnd.schemaregistry.v1+json`` and errors as
``{"error_code", "message"}``.
"""

from __future__ import annotations

from typing import Any

from narad.errors import CHALLENGE
from narad.http.body import MAX_BODY
from narad.http.registry import MEDIA
from narad.http.registry import PREFIX
from narad.registry.subjects import SUBJECT
from narad.schema.modes import Mode

TAG = "registry"
_ID = "^[0-9]{1,10}$"
# A version number is 1 to 2^31 - 1 (2147483647), spelled out digit by digit.
_VERSION = (
    "^(latest|-1|[1-9][0-9]{0,8}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}"
    "|214[0-6][0-9]{6}|2147[0-3][0-9]{5}|21474[0-7][0-9]{4}|214748[0-2][0-9]{3}"
    "|2147483[0-5][0-9]{2}|21474836[0-3][0-9]|214748364[0-7])$"
)

_ERRORS = {
    400: "A request the HTTP layer refuses.",
    401: "No, malformed or wrong credentials (error_code 40101).",
    403: "The credentials do not allow this (error_code 40301).",
    404: "No such subject (40401), version (40402), schema (40403), a "
    "soft-deleted subject or version (40404, 40406), one not soft-deleted "
    "first (40405, 40407), no subject-level config (40408), or no route.",
    405: "The route does not serve this method.",
    408: "The request body arrived too slowly.",
    409: "Incompatible with an earlier version (409), or refused by the "
    "history's rules: budgets, version cap, type (409).",
    413: f"The request body is over {MAX_BODY} bytes.",
    415: "A Content-Encoding other than identity.",
    422: "Invalid schema (42201: references that do not resolve too), "
    "version (42202), compatibility level (42203), an operation a topic's "
    "history refuses (42205), a version other versions reference (42206), "
    "or a request the API's rules refuse (422).",
    429: "Too many failed logins; retry after Retry-After seconds.",
    501: "A Transfer-Encoding other than chunked.",
    503: "Temporarily unavailable: retry (50001, 50002).",
    507: "The storage is full: nothing was stored.",
}

SCHEMAS: dict[str, Any] = {
    "RegistryError": {
        "type": "object",
        "required": ["error_code", "message"],
        "properties": {
            "error_code": {"type": "integer"},
            "message": {"type": "string"},
        },
    },
    "RegistryReference": {
        "type": "object",
        "required": ["name", "subject", "version"],
        "properties": {
            "name": {"type": "string"},
            "subject": {"type": "string"},
            "version": {"type": "integer"},
        },
    },
    "RegistrySchemaRequest": {
        "type": "object",
        "required": ["schema"],
        "properties": {
            "schema": {
                "type": "string",
                "description": "The schema as Confluent's clients send it: "
                "the document's text (JSON Schema, Avro) or .proto text.",
            },
            "schemaType": {
                "type": "string",
                "description": "JSON, AVRO (when absent) or PROTOBUF.",
            },
            "references": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/RegistryReference"},
                "description": "Registered versions the schema uses "
                "(docs/registry.md): an Avro named type's full name, a "
                "Protobuf import path, a JSON Schema $ref URI; at most 64.",
            },
        },
    },
    "RegistrySchema": {
        "type": "object",
        "required": ["schema"],
        "properties": {
            "schema": {"type": "string"},
            "schemaType": {"type": "string"},
            "references": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/RegistryReference"},
            },
        },
    },
    "RegistryVersion": {
        "type": "object",
        "required": ["subject", "version", "id", "schema"],
        "properties": {
            "subject": {"type": "string"},
            "version": {"type": "integer"},
            "id": {"type": "integer"},
            "schema": {"type": "string"},
            "schemaType": {"type": "string"},
            "references": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/RegistryReference"},
            },
        },
    },
    "RegistryConfigRequest": {
        "type": "object",
        "description": "compatibility, else compatibilityLevel; Confluent's "
        "other config fields are ignored.",
        "anyOf": [
            {"required": ["compatibility"]},
            {"required": ["compatibilityLevel"]},
        ],
        "properties": {
            "compatibility": {"enum": [m.value for m in Mode]},
            "compatibilityLevel": {"enum": [m.value for m in Mode]},
        },
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _response(description: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "headers": {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}},
    }
    if schema is not None:
        response["content"] = {MEDIA: {"schema": schema}}
    return response


def _error(status: int) -> dict[str, Any]:
    response = _response(_ERRORS[status], _ref("RegistryError"))
    if status == 401:
        response["headers"]["WWW-Authenticate"] = {
            "required": True,
            "schema": {"const": CHALLENGE},
        }
    elif status in (429, 503):
        response["headers"]["Retry-After"] = {
            "$ref": "#/components/headers/Retry-After"
        }
    return response


_AUTH = (401, 403, 429)
_BODY = (400, 408, 413, 415, 422, 501)
_WRITE = (503, 507)


def _operation(
    operation_id: str,
    summary: str,
    answer: dict[str, Any],
    errors: tuple[int, ...],
    *,
    parameters: list[Any] | None = None,
    body: bool = False,
    body_schema: str = "RegistrySchemaRequest",
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": [TAG],
    }
    if parameters:
        operation["parameters"] = parameters
    if body:
        operation["requestBody"] = {
            "required": True,
            "content": {
                media: {"schema": _ref(body_schema)}
                for media in (MEDIA, "application/json")
            },
        }
    responses = {"200": answer}
    for status in sorted(set(errors)):
        responses[str(status)] = _error(status)
    operation["responses"] = responses
    return operation


def _path(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": schema}


# true or false in any case; empty is false (as absent), as Confluent's own
# parsing of the flag takes it.
_BOOL = {"type": "string", "pattern": "^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?$"}
_SUBJECT = _path(
    "subject",
    "The subject; <topic>-value is the topic's schema history. "
    "Percent-encoded as Confluent's clients send it.",
    {"type": "string", "pattern": f"^{SUBJECT.pattern}$"},
)
_VERSION_PARAM = _path(
    "version",
    "A version number, latest or -1.",
    {"type": "string", "pattern": _VERSION},
)
_SCHEMA_ID = _path(
    "schema_id", "A global schema id.", {"type": "string", "pattern": _ID}
)
_DELETED = _query("deleted", "Include soft-deleted versions.", _BOOL)
_PERMANENT = _query("permanent", "Remove versions already soft-deleted.", _BOOL)
_FORMAT = _query(
    "format",
    "serialized: a Protobuf schema as a base64 FileDescriptorProto.",
    {"type": "string"},
)
_NORMALIZE = _query(
    "normalize", "Accepted; schemas are compared normalised anyway.", _BOOL
)
_STRINGS = {"type": "array", "items": {"type": "string"}}
_INTS = {"type": "array", "items": {"type": "integer"}}
_LEVEL = {
    "type": "object",
    "required": ["compatibilityLevel"],
    "properties": {"compatibilityLevel": {"enum": [m.value for m in Mode]}},
}
_SET_LEVEL = {
    "type": "object",
    "required": ["compatibility"],
    "properties": {"compatibility": {"enum": [m.value for m in Mode]}},
}
_MODE = {
    "type": "object",
    "required": ["mode"],
    "properties": {"mode": {"const": "READWRITE"}},
}


def paths() -> dict[str, Any]:
    """Every ``/registry`` route, as the OpenAPI document's ``paths``."""
    by_id_errors = (*_AUTH, 404, 422, 503)
    subject_errors = (*_AUTH, 404, 422, 503)
    version = _operation(
        "registryGetVersion",
        "A version of a subject",
        _response("The version.", _ref("RegistryVersion")),
        subject_errors,
        parameters=[_SUBJECT, _VERSION_PARAM, _DELETED, _FORMAT],
    )
    return {
        PREFIX: {
            "get": _operation(
                "registryRoot",
                "Confluent's root: an empty object",
                _response("Nothing.", {"type": "object"}),
                _AUTH,
            )
        },
        f"{PREFIX}/schemas/types": {
            "get": _operation(
                "registrySchemaTypes",
                "The schema types this node takes",
                _response("The types.", _STRINGS),
                _AUTH,
            )
        },
        f"{PREFIX}/schemas/ids/{{schema_id}}": {
            "get": _operation(
                "registrySchemaById",
                "The schema a global id stands for",
                _response("The schema.", _ref("RegistrySchema")),
                by_id_errors,
                parameters=[
                    _SCHEMA_ID,
                    _query("subject", "A subject using it.", {"type": "string"}),
                    _FORMAT,
                ],
            )
        },
        f"{PREFIX}/schemas/ids/{{schema_id}}/schema": {
            "get": _operation(
                "registrySchemaTextById",
                "The schema string alone",
                _response("The schema's text.", {}),
                by_id_errors,
                parameters=[
                    _SCHEMA_ID,
                    _query("subject", "A subject using it.", {"type": "string"}),
                    _FORMAT,
                ],
            )
        },
        f"{PREFIX}/schemas/ids/{{schema_id}}/subjects": {
            "get": _operation(
                "registrySubjectsOfId",
                "The subjects using a global id",
                _response("The subjects.", _STRINGS),
                by_id_errors,
                parameters=[_SCHEMA_ID, _DELETED],
            )
        },
        f"{PREFIX}/schemas/ids/{{schema_id}}/versions": {
            "get": _operation(
                "registryVersionsOfId",
                "The (subject, version) pairs using a global id",
                _response(
                    "The versions.",
                    {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["subject", "version"],
                            "properties": {
                                "subject": {"type": "string"},
                                "version": {"type": "integer"},
                            },
                        },
                    },
                ),
                by_id_errors,
                parameters=[_SCHEMA_ID, _DELETED],
            )
        },
        f"{PREFIX}/subjects": {
            "get": _operation(
                "registryListSubjects",
                "The subjects the caller may read",
                _response("The subjects.", _STRINGS),
                (*_AUTH, 422, 503),
                parameters=[
                    _query("subjectPrefix", "Only these.", {"type": "string"}),
                    _DELETED,
                ],
            )
        },
        f"{PREFIX}/subjects/{{subject}}": {
            "post": _operation(
                "registryLookup",
                "The version of a subject holding a schema",
                _response("The version.", _ref("RegistryVersion")),
                (*subject_errors, *_BODY),
                parameters=[_SUBJECT, _DELETED, _NORMALIZE],
                body=True,
            ),
            "delete": _operation(
                "registryDeleteSubject",
                "Soft-delete a standalone subject, then permanently",
                _response("The versions deleted.", _INTS),
                (*subject_errors, 409, *_WRITE),
                parameters=[_SUBJECT, _PERMANENT],
            ),
        },
        f"{PREFIX}/subjects/{{subject}}/versions": {
            "get": _operation(
                "registryListVersions",
                "The versions of a subject",
                _response("The version numbers.", _INTS),
                subject_errors,
                parameters=[_SUBJECT, _DELETED],
            ),
            "post": _operation(
                "registryRegister",
                "Register a schema under a subject (a topic's: a schema change)",
                _response(
                    "Its global id.",
                    {
                        "type": "object",
                        "required": ["id"],
                        "properties": {"id": {"type": "integer"}},
                    },
                ),
                (*subject_errors, *_BODY, 409, *_WRITE),
                parameters=[_SUBJECT, _NORMALIZE],
                body=True,
            ),
        },
        f"{PREFIX}/subjects/{{subject}}/versions/{{version}}": {
            "get": version,
            "delete": _operation(
                "registryDeleteVersion",
                "Soft-delete a version of a standalone subject, then permanently",
                _response("The version deleted.", {"type": "integer"}),
                (*subject_errors, 409, *_WRITE),
                parameters=[_SUBJECT, _VERSION_PARAM, _PERMANENT],
            ),
        },
        f"{PREFIX}/subjects/{{subject}}/versions/{{version}}/referencedby": {
            "get": _operation(
                "registryReferencedBy",
                "The ids of the schemas whose references name a version",
                _response("The global ids, ascending.", _INTS),
                subject_errors,
                parameters=[_SUBJECT, _VERSION_PARAM],
            )
        },
        f"{PREFIX}/subjects/{{subject}}/versions/{{version}}/schema": {
            "get": _operation(
                "registryGetVersionSchema",
                "The schema string of a version alone",
                _response("The schema's text.", {}),
                subject_errors,
                parameters=[_SUBJECT, _VERSION_PARAM, _DELETED, _FORMAT],
            )
        },
        f"{PREFIX}/compatibility/subjects/{{subject}}/versions": {
            "post": _operation(
                "registryCheckAll",
                "Is a schema compatible with every version of a subject?",
                _response("The verdict.", _ref("RegistryCompatibility")),
                (*subject_errors, *_BODY),
                parameters=[_SUBJECT, _NORMALIZE, _query("verbose", "", _BOOL)],
                body=True,
            )
        },
        f"{PREFIX}/compatibility/subjects/{{subject}}/versions/{{version}}": {
            "post": _operation(
                "registryCheckVersion",
                "Is a schema compatible with a version (latest: those the "
                "subject's mode names)?",
                _response("The verdict.", _ref("RegistryCompatibility")),
                (*subject_errors, *_BODY),
                parameters=[
                    _SUBJECT,
                    _VERSION_PARAM,
                    _NORMALIZE,
                    _query("verbose", "With the violations' messages.", _BOOL),
                ],
                body=True,
            )
        },
        f"{PREFIX}/config": {
            "get": _operation(
                "registryGetConfig",
                "The default mode of standalone subjects",
                _response("The mode.", _LEVEL),
                (*_AUTH, 503),
            ),
            "put": _operation(
                "registrySetConfig",
                "Set the default mode (admin on '*')",
                _response("The mode set.", _SET_LEVEL),
                (*_AUTH, *_BODY, *_WRITE),
                body=True,
                body_schema="RegistryConfigRequest",
            ),
            "delete": _operation(
                "registryDeleteConfig",
                "Clear the default mode (admin on '*')",
                _response("The mode it was.", _LEVEL),
                (*_AUTH, *_WRITE),
            ),
        },
        f"{PREFIX}/config/{{subject}}": {
            "get": _operation(
                "registryGetSubjectConfig",
                "A subject's mode (a topic's subject: the topic's)",
                _response("The mode.", _LEVEL),
                subject_errors,
                parameters=[
                    _SUBJECT,
                    _query("defaultToGlobal", "Else the default.", _BOOL),
                ],
            ),
            "put": _operation(
                "registrySetSubjectConfig",
                "Set a subject's mode (a topic's subject: the topic's)",
                _response("The mode set.", _SET_LEVEL),
                (*subject_errors, *_BODY, 409, *_WRITE),
                parameters=[_SUBJECT],
                body=True,
                body_schema="RegistryConfigRequest",
            ),
            "delete": _operation(
                "registryDeleteSubjectConfig",
                "Clear a subject's mode (a topic's goes back to BACKWARD)",
                _response("The mode it was.", _LEVEL),
                (*subject_errors, 409, *_WRITE),
                parameters=[_SUBJECT],
            ),
        },
        f"{PREFIX}/mode": {
            "get": _operation(
                "registryGetMode",
                "The registry's mode: always READWRITE",
                _response("The mode.", _MODE),
                _AUTH,
            )
        },
        f"{PREFIX}/mode/{{subject}}": {
            "get": _operation(
                "registryGetSubjectMode",
                "A subject's mode: always READWRITE",
                _response("The mode.", _MODE),
                subject_errors,
                parameters=[_SUBJECT],
            )
        },
    }


SCHEMAS["RegistryCompatibility"] = {
    "type": "object",
    "required": ["is_compatible"],
    "properties": {
        "is_compatible": {"type": "boolean"},
        "messages": _STRINGS,
    },
}
