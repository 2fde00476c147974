"""``/registry``: Confluent Schema Registry's REST API over the same histories.

A client's base URL is ``http://node:7942/registry``. Requests and answers
are Confluent's (``application/vnd.schemaregistry.v1+json``, also
``application/json``); so are the errors under ``/registry``
(``{"error_code": 40401, "message": ...}``, :func:`error_body`), whatever
refused the request, the authentication included.

Who may do what (docs/registry.md):

- a topic's subject ``<t>-value``: reading needs a produce or consume grant
  matching the topic (admin included), or owning it; registering, config
  and deletes need what altering the topic's schema needs (owning it, or an
  admin grant matching it);
- a standalone subject: reading needs any grant whose pattern matches the
  subject's name; registering needs a create (or admin) grant matching it;
  deleting and its config need an admin grant matching it;
- ``/schemas/ids/{id}``: anyone who may read a subject using the id;
- the registry's default config: a full admin to change, anyone to read;
- schema references (register, lookup, compatibility): reading each subject
  referenced, besides what the request itself needs.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import falcon

from narad.errors import InvalidArgument
from narad.errors import NotAllowed
from narad.http import encode
from narad.http.body import MAX_BODY
from narad.http.body import param
from narad.http.body import parse_json
from narad.http.body import read_body
from narad.registry.errors import InvalidVersion
from narad.registry.errors import SchemaNotFound
from narad.registry.errors import SubjectNotFound
from narad.registry.errors import confluent
from narad.registry.service import RegistryService
from narad.registry.service import parse_level
from narad.registry.subjects import SUBJECT
from narad.registry.subjects import Version
from narad.registry.subjects import parse_version
from narad.registry.subjects import topic_of
from narad.schema.references import reference_items
from narad.schema.references import references_bytes
from narad.security.access import authorize
from narad.security.access import principal
from narad.security.authn import Principal
from narad.security.grants import Action
from narad.storage import StoredSchema
from narad.storage import TopicMeta

PREFIX = "/registry"
MEDIA = "application/vnd.schemaregistry.v1+json"
MAX_ID = 2**31 - 1


def is_registry(req: falcon.Request) -> bool:
    """Whether ``req`` is under ``/registry`` (its errors are Confluent's)."""
    path = req.path
    return path == PREFIX or path.startswith(PREFIX + "/")


def error_body(exc: Exception, status: int) -> tuple[int, bytes]:
    """The status and Confluent body of a refusal whose ``/v1`` status is
    ``status``."""
    status, code, message = confluent(exc, status)
    return status, (encode({"error_code": code, "message": message}) + "\n").encode(
        "utf-8", "surrogatepass"
    )


def _answer(resp: falcon.Response, value: Any) -> None:
    resp.content_type = MEDIA
    resp.data = (encode(value) + "\n").encode("utf-8", "surrogatepass")


def _flag(req: falcon.Request, name: str) -> bool:
    """A boolean query parameter (``true``/``false``, any case; absent:
    false)."""
    value = param(req, name)
    if value is None or value == "":
        return False
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise InvalidArgument(f"{name} must be true or false, got {value[:100]!r}")
    return lowered == "true"


def _subject(subject: str) -> str:
    """A subject from the path (a "/" it held as ``%2F`` given back, see
    :class:`SubjectSlashes`); a name no subject can have is none (40401)."""
    subject = subject.replace(SLASH, "/")
    if SUBJECT.fullmatch(subject) is None:
        raise SubjectNotFound(subject)
    return subject


#: What stands for a "/" sent as ``%2F`` inside one segment of a registry
#: path, from routing until the resource reads the subject (a private-use
#: character: no subject holds it).
SLASH = "\ue000"


class SubjectSlashes:
    """Middleware: a ``%2F`` inside a segment of a ``/registry`` path stays
    inside that segment.

    The server decodes the path before routing, so ``/registry/subjects/
    common%2Faddress.proto/versions`` would route as if ``common`` were the
    subject and ``address.proto`` a route of it (nowhere: 404, as every
    ``%2F`` in a path is elsewhere). Confluent's Protobuf serializer names
    an imported file's subject by its import path, which holds "/" when the
    file sits in a directory: for ``/registry`` paths, the path is decoded
    again from the request as sent, segment by segment, each "/" a segment
    held standing as :data:`SLASH`, so routing sees the segments the client
    sent and :func:`_subject` gives the "/" back. A segment other than a
    subject holding one routes nowhere or is refused as before.
    """

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not is_registry(req):
            return
        raw = req.env.get("RAW_URI") or req.env.get("REQUEST_URI") or ""
        path = raw.partition("?")[0]
        if "%2" not in path or "%2f" not in path.lower():
            return
        decoded = [unquote(segment) for segment in path.split("/")]
        if any(SLASH in segment for segment in decoded):
            return  # sent as such: no subject holds it, leave it to 404
        routed = "/".join(segment.replace("/", SLASH) for segment in decoded)
        # Only where it is the path the server gave (an absolute-form
        # request target or a rewritten path is left as it was).
        if routed.replace(SLASH, "/") == req.path:
            req.path = routed
            req.context.subject_slashes = True


def _version(text: str) -> int | None:
    try:
        return parse_version(text)
    except ValueError:
        raise InvalidVersion(text) from None


def _body(req: falcon.Request) -> dict[str, Any]:
    value = parse_json(read_body(req, MAX_BODY))
    if not isinstance(value, dict):
        raise InvalidArgument("request body must be a JSON object")
    return value


def _schema_request(req: falcon.Request) -> tuple[str, str | None, bytes]:
    """``schema``, ``schemaType`` and ``references`` of a request body."""
    body = _body(req)
    schema = body.get("schema")
    if not isinstance(schema, str):
        raise InvalidArgument("schema is required: the schema as a string")
    kind = body.get("schemaType")
    if kind is not None and not isinstance(kind, str):
        raise InvalidArgument("schemaType must be a string")
    return schema, kind, references_bytes(body.get("references"))


# -- authorisation ------------------------------------------------------------


def _readable(who: Principal, subject: str, meta: TopicMeta | None) -> bool:
    perms = who.permissions
    if meta is None:
        return perms.any_matches(subject)
    name = meta.name
    return (
        perms.allows(Action.CONSUME, name)
        or perms.allows(Action.PRODUCE, name)
        or bool(who.name and meta.owner == who.name)
    )


def _refuse(who: Principal, words: str, subject: str, reason: str) -> NotAllowed:
    error = NotAllowed(who.name, words, None, reason)
    error.detail = f"user {who.name} may not {words} subject {subject}: {reason}"
    return error


class Access:
    """The checks of the registry's requests, for the caller of ``req``."""

    def __init__(self, registry: RegistryService) -> None:
        self.registry = registry

    def read(self, req: falcon.Request, subject: str) -> None:
        meta = self.registry.route(subject)
        if meta is not None:
            req.context.topic = meta.name
        who = principal(req)
        if not _readable(who, subject, meta):
            what = (
                f"that takes a produce or consume grant matching topic {meta.name}"
                if meta is not None
                else "no grant matches it"
            )
            raise _refuse(who, "read", subject, what)

    def write(self, req: falcon.Request, subject: str, action: Action) -> str | None:
        """Refuse unless the caller may change ``subject`` (``action``:
        CREATE to register, ADMIN to delete or configure a standalone one):
        the topic epoch it owns, as :func:`authorize` returns it."""
        meta = self.registry.route(subject, fresh=True)
        if meta is not None:
            return authorize(req, Action.ALTER, meta.name)
        who = principal(req)
        if not who.permissions.allows(action, subject):
            raise _refuse(
                who,
                "register under" if action is Action.CREATE else "change",
                subject,
                f"that takes a{'n' if action is Action.ADMIN else ''} "
                f"{action.value} grant matching it",
            )
        topic = topic_of(subject)
        if (
            action is Action.CREATE
            and topic
            and not who.permissions.allows(Action.CREATE, topic)
        ):
            # The subject holds the topic's name (no topic can be created
            # under it while it has versions): only who may create the
            # topic may take it so.
            raise _refuse(
                who,
                "register under",
                subject,
                f"it would hold the name of topic {topic}: that takes a create "
                "grant matching the topic too",
            )
        return None

    def references(self, req: falcon.Request, references: bytes) -> None:
        """Refuse unless the caller may read every subject ``references``
        names: a schema using another's types would otherwise show them
        (in a compatibility check's messages, say) to one who may not read
        it. Their own references were checked when they were registered."""
        for subject in sorted({s for _, s, _ in reference_items(references)}):
            meta = self.registry.route(subject)
            who = principal(req)
            if not _readable(who, subject, meta):
                raise _refuse(
                    who,
                    "reference",
                    subject,
                    "referencing a subject takes what reading it takes",
                )

    def admin(self, req: falcon.Request) -> None:
        who = principal(req)
        if not who.permissions.full_admin:
            raise _refuse(
                who, "change", "(the registry's default)", "that takes admin on '*'"
            )

    def schema(self, req: falcon.Request, stored: StoredSchema) -> None:
        """Refuse (40403, as if it did not exist) unless the caller may read a
        subject using the id, or is a full admin (who reads every subject,
        and ids no subject uses any more)."""
        who = principal(req)
        if who.permissions.full_admin:
            return
        for subject, _ in stored.uses:
            if _readable(who, subject, self.registry.route(subject)):
                return
        raise SchemaNotFound(f"Schema {stored.schema_id} not found")


# -- shapes ---------------------------------------------------------------------


def _typed(value: dict[str, Any], schema_type: str) -> dict[str, Any]:
    # Confluent leaves schemaType out for Avro, its default.
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    return value


def _references(raw: bytes) -> list[Any]:
    return parse_json(raw, "references") if raw else []


def _version_record(
    registry: RegistryService, version: Version, fmt: str = ""
) -> dict[str, Any]:
    kind = registry.schema_type(version.schema_type)
    record: dict[str, Any] = {
        "subject": version.subject,
        "version": version.version,
        "id": version.schema_id,
    }
    _typed(record, version.schema_type)
    references = _references(version.references)
    if references:
        record["references"] = references
    record["schema"] = kind.registry_schema(version.document, fmt)
    return record


# -- resources ------------------------------------------------------------------


class _Resource:
    def __init__(self, registry: RegistryService) -> None:
        self.registry = registry
        self.access = Access(registry)


class Root(_Resource):
    """``GET /registry``: Confluent answers its root with an empty object."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _answer(resp, {})


class SchemaTypes(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _answer(resp, self.registry.types())


class SchemaById(_Resource):
    """``/schemas/ids/{schema_id}`` and its ``schema``, ``subjects`` and
    ``versions``."""

    def _stored(self, req: falcon.Request, schema_id: str) -> StoredSchema:
        if not (schema_id.isascii() and schema_id.isdigit()) or len(schema_id) > 10:
            raise SchemaNotFound(f"Schema {schema_id[:20]} not found")
        number = int(schema_id)
        if number > MAX_ID:
            raise SchemaNotFound(f"Schema {number} not found")
        stored = self.registry.by_id(number)
        self.access.schema(req, stored)
        subject = param(req, "subject")
        if subject and not any(s == subject for s, _ in stored.uses):
            raise SchemaNotFound(f"Schema {number} not found in subject '{subject}'")
        return stored

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, schema_id: str
    ) -> None:
        stored = self._stored(req, schema_id)
        kind = self.registry.schema_type(stored.schema_type)
        fmt = param(req, "format") or ""
        value: dict[str, Any] = _typed({}, stored.schema_type)
        references = _references(stored.references)
        if references:
            value["references"] = references
        value["schema"] = kind.registry_schema(stored.document, fmt)
        _answer(resp, value)

    def on_get_schema(
        self, req: falcon.Request, resp: falcon.Response, schema_id: str
    ) -> None:
        stored = self._stored(req, schema_id)
        kind = self.registry.schema_type(stored.schema_type)
        text = kind.registry_schema(stored.document, param(req, "format") or "")
        resp.content_type = MEDIA
        resp.data = text.encode("utf-8", "surrogatepass")

    def _uses(self, req: falcon.Request, stored: StoredSchema) -> list[tuple[str, int]]:
        who = principal(req)
        uses = self.registry.uses(stored, deleted=_flag(req, "deleted"))
        return [(s, v) for s, v in uses if _readable(who, s, self.registry.route(s))]

    def on_get_subjects(
        self, req: falcon.Request, resp: falcon.Response, schema_id: str
    ) -> None:
        stored = self._stored(req, schema_id)
        subjects = sorted({s for s, _ in self._uses(req, stored)})
        _answer(resp, subjects)

    def on_get_versions(
        self, req: falcon.Request, resp: falcon.Response, schema_id: str
    ) -> None:
        stored = self._stored(req, schema_id)
        _answer(
            resp,
            [{"subject": s, "version": v} for s, v in self._uses(req, stored)],
        )


class Subjects(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        prefix = param(req, "subjectPrefix") or ""
        who = principal(req)
        names = self.registry.list_subjects(
            prefix,
            deleted=_flag(req, "deleted"),
            readable=lambda subject, meta: _readable(who, subject, meta),
        )
        _answer(resp, names)


class SubjectItem(_Resource):
    """``POST /subjects/{subject}`` (lookup) and ``DELETE`` (the subject)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, subject: str) -> None:
        subject = _subject(subject)
        self.access.read(req, subject)
        schema, kind, references = _schema_request(req)
        self.access.references(req, references)
        found = self.registry.lookup(
            subject, schema, kind, references, deleted=_flag(req, "deleted")
        )
        _answer(resp, _version_record(self.registry, found))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, subject: str
    ) -> None:
        subject = _subject(subject)
        self.access.write(req, subject, Action.ADMIN)
        permanent = _flag(req, "permanent")
        _answer(resp, self.registry.delete_subject(subject, permanent=permanent))


class SubjectVersions(_Resource):
    """``GET /subjects/{subject}/versions`` and ``POST`` (register)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, subject: str) -> None:
        subject = _subject(subject)
        self.access.read(req, subject)
        versions = self.registry.versions(subject, deleted=_flag(req, "deleted"))
        _answer(resp, [v.version for v in versions])

    def on_post(self, req: falcon.Request, resp: falcon.Response, subject: str) -> None:
        subject = _subject(subject)
        epoch = self.access.write(req, subject, Action.CREATE)
        _flag(req, "normalize")  # identities are normalised whatever it says
        schema, kind, references = _schema_request(req)
        self.access.references(req, references)
        schema_id = self.registry.register(
            subject, schema, kind, references, epoch=epoch
        )
        _answer(resp, {"id": schema_id})


class SubjectVersion(_Resource):
    """``/subjects/{subject}/versions/{version}`` and its ``schema``."""

    def _found(self, req: falcon.Request, subject: str, version: str) -> Version:
        subject = _subject(subject)
        number = _version(version)
        self.access.read(req, subject)
        return self.registry.version(subject, number, deleted=_flag(req, "deleted"))

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, subject: str, version: str
    ) -> None:
        found = self._found(req, subject, version)
        fmt = param(req, "format") or ""
        _answer(resp, _version_record(self.registry, found, fmt))

    def on_get_schema(
        self, req: falcon.Request, resp: falcon.Response, subject: str, version: str
    ) -> None:
        found = self._found(req, subject, version)
        kind = self.registry.schema_type(found.schema_type)
        resp.content_type = MEDIA
        resp.data = kind.registry_schema(
            found.document, param(req, "format") or ""
        ).encode("utf-8", "surrogatepass")

    def on_get_referencedby(
        self, req: falcon.Request, resp: falcon.Response, subject: str, version: str
    ) -> None:
        found = self._found(req, subject, version)
        _answer(resp, self.registry.referenced_by(found.subject, found.version))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, subject: str, version: str
    ) -> None:
        subject = _subject(subject)
        number = _version(version)
        self.access.write(req, subject, Action.ADMIN)
        deleted = self.registry.delete_version(
            subject, number, permanent=_flag(req, "permanent")
        )
        _answer(resp, deleted)


class Compatibility(_Resource):
    """``POST /compatibility/subjects/{subject}/versions[/{version}]``."""

    def _check(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        subject: str,
        number: int | None,
        every: bool,
    ) -> None:
        self.access.read(req, subject)
        _flag(req, "normalize")
        verbose = _flag(req, "verbose")
        schema, kind, references = _schema_request(req)
        self.access.references(req, references)
        messages = self.registry.check(
            subject, number, schema, kind, references, every=every
        )
        value: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            value["messages"] = messages
        _answer(resp, value)

    def on_post(self, req: falcon.Request, resp: falcon.Response, subject: str) -> None:
        self._check(req, resp, _subject(subject), None, True)

    def on_post_version(
        self, req: falcon.Request, resp: falcon.Response, subject: str, version: str
    ) -> None:
        subject = _subject(subject)
        self._check(req, resp, subject, _version(version), False)


def _level_request(req: falcon.Request) -> object:
    """The level of a config body: ``compatibility`` (Confluent's request
    field), else ``compatibilityLevel`` (its answer's), each checked when
    given; other fields of Confluent's config are ignored."""
    body = _body(req)
    given = [body[f] for f in ("compatibility", "compatibilityLevel") if f in body]
    for level in given:
        parse_level(level)
    return given[0] if given else None


class GlobalConfig(_Resource):
    """``/config``: the default mode of standalone subjects."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _answer(resp, {"compatibilityLevel": self.registry.global_mode()})

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.access.admin(req)
        level = self.registry.set_config(None, _level_request(req))
        _answer(resp, {"compatibility": level})

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.access.admin(req)
        _answer(resp, {"compatibilityLevel": self.registry.delete_config(None)})


class SubjectConfig(_Resource):
    """``/config/{subject}``: a topic's subject is the topic's mode."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, subject: str) -> None:
        subject = _subject(subject)
        self.access.read(req, subject)
        level = self.registry.config(
            subject, default_to_global=_flag(req, "defaultToGlobal")
        )
        _answer(resp, {"compatibilityLevel": level})

    def on_put(self, req: falcon.Request, resp: falcon.Response, subject: str) -> None:
        subject = _subject(subject)
        epoch = self.access.write(req, subject, Action.ADMIN)
        level = self.registry.set_config(subject, _level_request(req), epoch=epoch)
        _answer(resp, {"compatibility": level})

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, subject: str
    ) -> None:
        subject = _subject(subject)
        epoch = self.access.write(req, subject, Action.ADMIN)
        level = self.registry.delete_config(subject, epoch=epoch)
        _answer(resp, {"compatibilityLevel": level})


class Mode(_Resource):
    """``/mode`` and ``/mode/{subject}``: always READWRITE (Narad has no
    import or read-only modes)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _answer(resp, {"mode": "READWRITE"})

    def on_get_subject(
        self, req: falcon.Request, resp: falcon.Response, subject: str
    ) -> None:
        subject = _subject(subject)
        self.access.read(req, subject)
        _answer(resp, {"mode": "READWRITE"})


def add_routes(app: falcon.App, registry: RegistryService) -> None:
    """Every ``/registry`` route."""
    by_id = SchemaById(registry)
    app.add_route(PREFIX, Root(registry))
    app.add_route(f"{PREFIX}/schemas/types", SchemaTypes(registry))
    app.add_route(f"{PREFIX}/schemas/ids/{{schema_id}}", by_id)
    for part in ("schema", "subjects", "versions"):
        app.add_route(f"{PREFIX}/schemas/ids/{{schema_id}}/{part}", by_id, suffix=part)
    app.add_route(f"{PREFIX}/subjects", Subjects(registry))
    app.add_route(f"{PREFIX}/subjects/{{subject}}", SubjectItem(registry))
    app.add_route(f"{PREFIX}/subjects/{{subject}}/versions", SubjectVersions(registry))
    version = SubjectVersion(registry)
    app.add_route(f"{PREFIX}/subjects/{{subject}}/versions/{{version}}", version)
    app.add_route(
        f"{PREFIX}/subjects/{{subject}}/versions/{{version}}/schema",
        version,
        suffix="schema",
    )
    app.add_route(
        f"{PREFIX}/subjects/{{subject}}/versions/{{version}}/referencedby",
        version,
        suffix="referencedby",
    )
    check = Compatibility(registry)
    app.add_route(f"{PREFIX}/compatibility/subjects/{{subject}}/versions", check)
    app.add_route(
        f"{PREFIX}/compatibility/subjects/{{subject}}/versions/{{version}}",
        check,
        suffix="version",
    )
    app.add_route(f"{PREFIX}/config", GlobalConfig(registry))
    app.add_route(f"{PREFIX}/config/{{subject}}", SubjectConfig(registry))
    mode = Mode(registry)
    app.add_route(f"{PREFIX}/mode", mode)
    app.add_route(f"{PREFIX}/mode/{{subject}}", mode, suffix="subject")
