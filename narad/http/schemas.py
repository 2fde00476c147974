"""``/v1/topics/{name}/schemas``: a topic's schema history, read-only, and
the dry-run compatibility check of a proposed schema."""

from __future__ import annotations

import json
from typing import Any

import falcon

from narad import jsontext
from narad.broker.topics import TopicService
from narad.errors import InvalidArgument
from narad.errors import NotFound
from narad.http import dumps
from narad.http import json_body
from narad.http.body import ascii_digits
from narad.http.body import integer
from narad.http.body import read_object
from narad.http.body import refuse_unknown
from narad.http.topics import check_name
from narad.http.topics import mode
from narad.quoting import quote
from narad.schema.modes import Direction
from narad.schema.modes import Finding
from narad.schema.service import Against
from narad.schema.service import SchemaService
from narad.security.access import authorize
from narad.security.access import confirm_read
from narad.security.grants import Action

CHECK_FIELDS = ("schema", "against", "mode")
MAX_VERSION = 10**9
CHECKED_HEADER = "Narad-Checked-Versions"
NO_CHANGE_HEADER = "Narad-No-Change"
TRUNCATED_HEADER = "Narad-Report-Truncated"
TYPE_HEADER = "Narad-Schema-Type"
#: A version registered with schema references (under /registry) names them
#: here, as compact JSON (ASCII): what its document needs to be read.
REFERENCES_HEADER = "Narad-Schema-References"


class SchemaHistory:
    def __init__(self, topics: TopicService, schemas: SchemaService) -> None:
        self.topics = topics
        self.schemas = schemas

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        owned = authorize(req, Action.READ, check_name(name))
        meta, sizes = self.schemas.sizes(self.topics.refresh(name))
        confirm_read(req, name, owned)
        # A history has one type: each version shows it, as the record does.
        kind = meta.schema_type
        history: dict[str, Any] = {
            "topic": meta.name,
            "current_version": meta.schema_version or None,
            "total_bytes": meta.schema_bytes,
            "schema_type": kind,
            "encoding": meta.encoding,
        }
        if meta.proto_message:
            history["proto_message"] = meta.proto_message
        history["versions"] = [
            {"version": s.version, "size": s.size, "schema_type": kind} for s in sizes
        ]
        resp.text = dumps(history)

    on_head = on_get

    def on_get_version(
        self, req: falcon.Request, resp: falcon.Response, name: str, version: str
    ) -> None:
        owned = authorize(req, Action.READ, check_name(name))
        meta = self.topics.refresh(name)
        if version == "latest":
            stored = self.schemas.latest(meta)
            if stored is None:
                raise NotFound(f"topic {meta.name} has no schema")
        elif ascii_digits(version):
            # A number too long to be a version is none stored either (404).
            digits = version.lstrip("0") or "0"
            if len(digits) > len(str(MAX_VERSION)):
                raise NotFound(
                    f"topic {meta.name} has no schema version {quote(digits)}"
                )
            stored = self.schemas.stored(meta.name, int(digits))
        else:
            raise InvalidArgument(
                f"version must be a positive integer or latest, got {quote(version)}"
            )
        confirm_read(req, name, owned)
        resp.content_type = falcon.MEDIA_JSON
        resp.set_header("Narad-Schema-Version", str(stored.version))
        resp.set_header(TYPE_HEADER, meta.schema_type)
        if stored.references:
            references = jsontext.loads(stored.references, max_depth=3)
            resp.set_header(
                REFERENCES_HEADER, json.dumps(references, separators=(",", ":"))
            )
        resp.data = stored.document

    on_head_version = on_get_version


class SchemaCheck:
    """``POST .../schemas/compatibility``: would this schema change pass?

    The body is ``{"schema": ..., "against": "latest" | "all" | <version>,
    "mode": <mode>}`` (only ``schema`` required). The answer reports every
    violation (within the report's bounds), in the topic's mode unless the
    body names one; nothing is stored.
    """

    def __init__(self, topics: TopicService, schemas: SchemaService) -> None:
        self.topics = topics
        self.schemas = schemas

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        # Reading the schemas, not changing them: a reader of the topic may
        # ask (any grant matching it, or owning it), before its body is read.
        owned = authorize(req, Action.READ, check_name(name))
        body, raw = read_object(req)
        refuse_unknown(body, CHECK_FIELDS)
        if "schema" not in body:
            raise InvalidArgument("schema is required: the schema to check")
        against = _against(body["against"]) if "against" in body else None
        checked_mode = mode(body["mode"], "mode") if "mode" in body else None
        meta = self.topics.refresh(name)
        result = self.schemas.dry_run(
            meta, jsontext.raw_members(raw)["schema"], against, checked_mode
        )
        confirm_read(req, name, owned)
        report = result.report
        # The body is the report, exactly; what else the check knows
        # (which versions it read, a no-change shortcut, a cut report) rides
        # in headers, as the version of a schema read does.
        if report.checked:
            resp.set_header(CHECKED_HEADER, ", ".join(map(str, report.checked)))
        if result.no_change:
            resp.set_header(NO_CHANGE_HEADER, "true")
        if report.truncated:
            resp.set_header(TRUNCATED_HEADER, "true")
        # A report quotes names from the schemas, lone surrogates included.
        resp.data = json_body(
            {
                "compatible": report.compatible,
                "mode": result.mode.value,
                "violations": [_violation(f) for f in report.findings],
            }
        )


def _against(value: Any) -> Against:
    if value in ("latest", "all"):
        return value
    if isinstance(value, str):
        raise InvalidArgument(
            f'against must be "latest", "all" or a version number, got {quote(value)}'
        )
    return integer(value, "against", high=MAX_VERSION)


def _violation(finding: Finding) -> dict[str, Any]:
    """A violation as the report lists it: the rule's own message, to which a
    forward finding adds the way it reads (its pointer is into the stored
    version, and its words describe the change from the new schema to that
    version)."""
    violation = finding.violation
    message = violation.message
    if finding.direction is Direction.FORWARD and not finding.swapped:
        v = finding.version
        message += f" (forward: version {v} reading what the new schema writes)"
    elif finding.direction is Direction.FORWARD:
        v = finding.version
        message += (
            f" (forward: read as a change from the new schema to version {v}, "
            f"at a place in version {v})"
        )
    return {
        "pointer": violation.pointer,
        "keyword": violation.keyword,
        "message": message,
        "against_version": finding.version,
    }
