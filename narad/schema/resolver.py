"""An index of one schema document: subschemas, base URIs, anchors, references.

Only in-document references exist (registration refuses external ones), so
resolving a reference never loads anything: it maps a URI reference, taken
against the base URI in effect where it is written, to a place in the same
document. The validator compiles its references through :meth:`SchemaIndex.resolve`
and its dynamic references through :meth:`SchemaIndex.dynamic_targets` and
:meth:`SchemaIndex.recursive_targets`; registration counts paths through the
same calls, so both agree on where every reference leads.

Pointers are JSON pointers from the document root (``""`` is the root,
``"/$defs/a"`` a definition). URIs are plain strings; the document root's base
URI is the ``base_uri`` the index was built with, unless the root's ``$id``
(draft-04 ``id``) says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from narad.quoting import quote
from narad.quoting import quote_pointer
from narad.schema.drafts import Draft

__all__ = (
    "BASE_URI",
    "LIST_SUBSCHEMAS",
    "MAP_SUBSCHEMAS",
    "REFERENCE_KEYWORDS",
    "SINGLE_SUBSCHEMA",
    "Duplicate",
    "SchemaIndex",
    "Target",
    "UnresolvableRef",
    "escape",
    "join_pointer",
    "lookup",
    "subschema_children",
    "unescape",
    "urljoin",
)

# The keywords by which a subschema points elsewhere in the document.
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# The base URI of a stored document without an absolute $id, for registration
# and validation alike, so both read its nested $id values the same way. Only
# in-document references are allowed, so it never reaches anything.
BASE_URI = "narad://schema/registration"

# Keywords whose value is a subschema, a list of them, or a map of them. Only
# those the document's draft defines are walked; definitions containers are
# walked on every draft because documents keep them whatever their draft.
SINGLE_SUBSCHEMA = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
LIST_SUBSCHEMAS = frozenset({"allOf", "anyOf", "items", "oneOf", "prefixItems"})
MAP_SUBSCHEMAS = frozenset(
    {
        "$defs",
        "definitions",
        "dependencies",
        "dependentSchemas",
        "patternProperties",
        "properties",
    }
)
_ALWAYS_WALKED = frozenset({"$defs", "definitions"})
# Keywords that can give a subschema a URI; most subschemas have none.
_IDENTIFYING = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"})

# RFC 3986, appendix B.
_URI_PARTS = re.compile(
    r"(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?",
    re.DOTALL,
)


class UnresolvableRef(ValueError):
    """A reference that leads nowhere in the document."""


@dataclass(frozen=True)
class Duplicate:
    """Two subschemas of one document declaring the same URI.

    Attributes:
        what: ``"anchor"`` or ``"resource"``.
        name: The anchor name, or the resource URI.
        first: (pointer, keyword) of one declaration, the lesser pointer.
        second: (pointer, keyword) of the other.
    """

    what: str
    name: str
    first: tuple[str, str]
    second: tuple[str, str]

    def __str__(self) -> str:
        (a, a_keyword), (b, b_keyword) = self.first, self.second
        if self.what == "resource":
            what = f"the resource {quote(self.name)} is declared twice"
        else:
            what = f"the anchor {quote(self.name)} is declared twice in one resource"
        return (
            f"{what}: by the {a_keyword} at {quote_pointer(a)} and the {b_keyword} "
            f"at {quote_pointer(b)}"
        )


@dataclass(frozen=True)
class Target:
    """Where a reference leads.

    Attributes:
        pointer: JSON pointer of the target from the document root.
        schema: The value there (a subschema: a dict or a bool).
        base_uri: The base URI in effect at the target, without fragment.
    """

    pointer: str
    schema: Any
    base_uri: str


def escape(token: str) -> str:
    """Escape one JSON pointer reference token."""
    if "~" in token or "/" in token:
        return token.replace("~", "~0").replace("/", "~1")
    return token  # the common case, called per subschema: no copies


def unescape(token: str) -> str:
    """Undo :func:`escape` on one reference token."""
    if "~" in token:
        return token.replace("~1", "/").replace("~0", "~")
    return token


def lookup(document: Any, pointer: str) -> Any:
    """The value at JSON pointer ``pointer`` in ``document``.

    Raises:
        UnresolvableRef: the pointer leads nowhere in the document.
    """
    value = document
    for token in pointer.split("/")[1:]:
        token = unescape(token)
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and _is_index(token, len(value)):
            value = value[int(token)]
        else:
            raise UnresolvableRef("reference to a place the document lacks")
    return value


def join_pointer(pointer: str, *tokens: str | int) -> str:
    """Append reference tokens to a JSON pointer."""
    # A plain loop: one or two tokens is the rule, too few for a generator.
    for token in tokens:
        pointer += "/" + (escape(token) if isinstance(token, str) else str(token))
    return pointer


def _split(uri: str) -> tuple[str | None, str | None, str, str | None, str | None]:
    match = _URI_PARTS.fullmatch(uri)
    assert match is not None  # every string matches appendix B
    scheme, authority, path, query, fragment = match.groups()
    return scheme, authority, path, query, fragment


def _unsplit(
    scheme: str | None, authority: str | None, path: str, query: str | None
) -> str:
    uri = f"{scheme}:" if scheme is not None else ""
    if authority is not None:
        uri += "//" + authority
    uri += path
    if query is not None:
        uri += "?" + query
    return uri


def _remove_dot_segments(path: str) -> str:
    output: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1 or (output and output[0] != ""):
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def urljoin(base: str, ref: str) -> tuple[str, str]:
    """Resolve ``ref`` against ``base`` (RFC 3986 section 5.2).

    Unlike :func:`urllib.parse.urljoin` this works for every scheme, including
    ``narad:`` and ``urn:``.

    Returns:
        The target URI without fragment, and the fragment (``""`` when none).
    """
    scheme, authority, path, query, fragment = _split(ref)
    b_scheme, b_authority, b_path, b_query, _ = _split(base)
    if scheme is not None:
        path = _remove_dot_segments(path)
    elif authority is not None:
        scheme, path = b_scheme, _remove_dot_segments(path)
    elif path == "":
        scheme, authority, path = b_scheme, b_authority, b_path
        query = query if query is not None else b_query
    else:
        scheme, authority = b_scheme, b_authority
        if not path.startswith("/"):
            if b_authority is not None and b_path == "":
                path = "/" + path
            else:
                path = b_path[: b_path.rfind("/") + 1] + path
        path = _remove_dot_segments(path)
    return _unsplit(scheme, authority, path, query), fragment or ""


def subschema_children(
    schema: Mapping[str, Any], keywords: frozenset[str]
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Yield ``(tokens, subschema)`` for each subschema directly under ``schema``.

    ``tokens`` are the reference tokens from ``schema`` to the subschema.
    """
    for key, value in schema.items():
        if key not in keywords and key not in _ALWAYS_WALKED:
            continue
        if key in LIST_SUBSCHEMAS and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict | bool):
                    yield (key, i), item
        elif key in MAP_SUBSCHEMAS and isinstance(value, dict):
            for name, item in value.items():
                if isinstance(item, dict | bool):
                    yield (key, name), item
        elif key in SINGLE_SUBSCHEMA and isinstance(value, dict | bool):
            yield (key,), value


class SchemaIndex:
    """Every subschema of one document, with the URIs that name them.

    Attributes:
        document: The schema document (parsed JSON).
        draft: The draft the document is written in.
        root_uri: Base URI of the document root, without fragment.
        subschemas: Every subschema in a keyword position, by pointer.
        base_uris: The base URI in effect at each pointer of ``subschemas``.
        resources: Pointer of each schema resource, by its URI.
        anchors: Pointer of each plain-name anchor (``$anchor``, a
            ``$dynamicAnchor``, or an ``$id``/``id`` with a name fragment
            before 2019-09), by ``"<resource uri>#<name>"``.
        dynamic_anchors: Pointer of each ``$dynamicAnchor``, by
            ``"<resource uri>#<name>"``.
        recursive_anchors: Pointers of resource roots carrying
            ``"$recursiveAnchor": true``.
        has_dynamic_refs: The document uses ``$dynamicRef`` or ``$recursiveRef``.
        duplicates: Each anchor declared twice in one resource, and each
            resource URI two subschemas declare (registration refuses them;
            of the two, the one the walk met first is in ``anchors`` and
            ``resources``).
    """

    def __init__(self, document: Any, *, draft: Draft, base_uri: str) -> None:
        self.document = document
        self.draft = draft
        self.subschemas: dict[str, Any] = {}
        self.base_uris: dict[str, str] = {}
        self.resources: dict[str, str] = {}
        self.anchors: dict[str, str] = {}
        self.dynamic_anchors: dict[str, str] = {}
        self.recursive_anchors: set[str] = set()
        self.has_dynamic_refs = False
        self.duplicates: list[Duplicate] = []
        self._declared: dict[str, tuple[str, str]] = {}
        self.root_uri = urljoin(base_uri, "")[0]
        self.resources[self.root_uri] = ""
        self._declared[self.root_uri] = ("", "base URI")
        self._walk(document)
        self.root_uri = self.base_uris[""]

    def _walk(self, document: Any) -> None:
        keywords = self.draft.keywords
        walked = keywords | _ALWAYS_WALKED
        dynamic = "$dynamicRef" in keywords or "$recursiveRef" in keywords
        subschemas, base_uris = self.subschemas, self.base_uris
        stack: list[tuple[str, Any, str]] = [("", document, self.root_uri)]
        while stack:
            pointer, schema, base = stack.pop()
            subschemas[pointer] = schema
            if not schema or schema is True:  # nothing inside, nothing declared
                base_uris[pointer] = base
                continue
            if not _IDENTIFYING.isdisjoint(schema):
                base = self._identify(pointer, schema, base)
            base_uris[pointer] = base
            if dynamic and ("$dynamicRef" in schema or "$recursiveRef" in schema):
                self.has_dynamic_refs = True
            for key, value in schema.items():
                if key in walked:
                    self._push_children(stack, pointer, key, value, base)

    @staticmethod
    def _push_children(
        stack: list[tuple[str, Any, str]], pointer: str, key: str, value: Any, base: str
    ) -> None:
        """Push what :func:`subschema_children` yields for ``key``, in its order."""
        at = pointer + "/" + escape(key)
        if key in LIST_SUBSCHEMAS and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict | bool):
                    stack.append((f"{at}/{i}", item, base))
        elif key in MAP_SUBSCHEMAS and isinstance(value, dict):
            for name, item in value.items():
                if isinstance(item, dict | bool):
                    stack.append((at + "/" + escape(name), item, base))
        elif key in SINGLE_SUBSCHEMA and isinstance(value, dict | bool):
            stack.append((at, value, base))

    def _identify(self, pointer: str, schema: dict[str, Any], base: str) -> str:
        """Register the URIs ``schema`` declares; return its base URI."""
        draft = self.draft
        keywords = draft.keywords
        id_keyword = draft.id_keyword
        declared = schema.get(id_keyword)
        ignored = draft.ref_overrides_siblings and "$ref" in schema
        if isinstance(declared, str) and id_keyword in keywords and not ignored:
            uri, fragment = urljoin(base, declared)
            if declared.startswith("#"):
                uri = base
            else:
                base = uri
                self._declare("resource", uri, uri, pointer, id_keyword)
            if fragment and draft.id_fragment_anchors:
                key = f"{uri}#{fragment}"
                self._declare("anchor", key, fragment, pointer, id_keyword)
        for keyword in ("$anchor", "$dynamicAnchor"):
            name = schema.get(keyword)
            if isinstance(name, str) and keyword in keywords:
                key = f"{base}#{name}"
                self._declare("anchor", key, name, pointer, keyword)
                if keyword == "$dynamicAnchor":
                    self.dynamic_anchors.setdefault(key, pointer)
        recursive = schema.get("$recursiveAnchor") is True
        if recursive and "$recursiveAnchor" in keywords and self._is_resource(pointer):
            self.recursive_anchors.add(pointer)
        return base

    def _declare(
        self, what: str, key: str, name: str, pointer: str, keyword: str
    ) -> None:
        """Enter ``key`` in ``resources`` or ``anchors``; a second subschema
        declaring it is a duplicate (one may declare an anchor twice)."""
        table = self.resources if what == "resource" else self.anchors
        known = table.setdefault(key, pointer)
        if known == pointer:
            self._declared.setdefault(key, (pointer, keyword))
            return
        first, second = sorted([self._declared[key], (pointer, keyword)])
        self.duplicates.append(Duplicate(what, name, first, second))

    def _is_resource(self, pointer: str) -> bool:
        return pointer == "" or pointer in self.resources.values()

    def resolve(self, ref: str, base_uri: str) -> Target:
        """Resolve the reference ``ref`` written where ``base_uri`` is in effect.

        The fragment is a plain-name anchor or a JSON pointer, taken from the
        resource the URI names; a pointer may lead into a member no keyword
        owns.

        Raises:
            UnresolvableRef: the URI names no resource of this document, the
                anchor does not exist, or the pointer leads nowhere.
        """
        uri, fragment = urljoin(base_uri, ref)
        fragment = unquote(fragment)
        if uri not in self.resources:
            raise UnresolvableRef("reference to a resource outside the document")
        if fragment == "" or fragment.startswith("/"):
            pointer = self.resources[uri] + fragment
            return Target(pointer, self._lookup(pointer), self.base_uri_at(pointer))
        pointer = self.anchors.get(f"{uri}#{fragment}")
        if pointer is None:
            raise UnresolvableRef("reference to an anchor the document lacks")
        return Target(pointer, self.subschemas[pointer], self.base_uris[pointer])

    def dynamic_targets(self, ref: str, base_uri: str) -> tuple[Target, ...]:
        """Every target the ``$dynamicRef`` ``ref`` can pick, static one first.

        When the static target carries a ``$dynamicAnchor`` of the fragment's
        name, every ``$dynamicAnchor`` of that name in the document is a
        candidate, since the dynamic scope decides among them.
        """
        first = self.resolve(ref, base_uri)
        name = self.dynamic_anchor_name(ref, first)
        if name is None:
            return (first,)
        others = [
            self._target(pointer)
            for key, pointer in sorted(self.dynamic_anchors.items(), key=_by_pointer)
            if key.rpartition("#")[2] == name and pointer != first.pointer
        ]
        return (first, *others)

    def dynamic_anchor_name(self, ref: str, first: Target) -> str | None:
        """The anchor name ``ref`` looks up dynamically, or None if static."""
        fragment = unquote(urljoin(first.base_uri, ref)[1])
        if not fragment or fragment.startswith("/"):
            return None
        schema = first.schema
        if isinstance(schema, dict) and schema.get("$dynamicAnchor") == fragment:
            return fragment
        return None

    def recursive_targets(self, base_uri: str) -> tuple[Target, ...]:
        """Every target a ``$recursiveRef`` (2019-09) can pick, static one first."""
        first = self.resolve("#", base_uri)
        if first.pointer not in self.recursive_anchors:
            return (first,)
        others = [
            self._target(pointer)
            for pointer in sorted(self.recursive_anchors)
            if pointer != first.pointer
        ]
        return (first, *others)

    def base_uri_at(self, pointer: str) -> str:
        """The base URI in effect at ``pointer`` (nearest indexed ancestor's)."""
        while pointer not in self.base_uris:
            pointer = pointer[: pointer.rfind("/")]
        return self.base_uris[pointer]

    def _target(self, pointer: str) -> Target:
        return Target(pointer, self.subschemas[pointer], self.base_uris[pointer])

    def _lookup(self, pointer: str) -> Any:
        if pointer in self.subschemas:
            return self.subschemas[pointer]
        value = lookup(self.document, pointer)
        if not isinstance(value, dict | bool):
            raise UnresolvableRef("reference to a value that is not a schema")
        return value


def _by_pointer(item: tuple[str, str]) -> str:
    return item[1]


def _is_index(token: str, length: int) -> bool:
    if not (token.isascii() and token.isdigit()):
        return False
    return (token == "0" or not token.startswith("0")) and int(token) < length
