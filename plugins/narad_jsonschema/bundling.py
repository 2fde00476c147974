"""Schema references of the ``JSON`` type: one compound document.

A Confluent JSON Schema reference's ``name`` is a URI the schema's ``$ref``
values name (``"customer.json"``, ``"https://example.com/customer.json"``,
with a fragment or not), resolved against the referring document's ``$id``
where it has one. Narad's engine resolves references only inside a
document, so the referenced documents are bundled into it, as JSON Schema's
compound documents are: each referenced version once (a diamond is embedded
once), dependencies first, under ``$defs`` at the root with an ``$id`` of its
own (``narad://reference/<n>``: its own ``#`` references keep resolving
inside it, its anchors stay its own), and every ``$ref`` naming a reference
rewritten to that ``$id`` (the fragment kept). The engine accepts references
to those ``$id`` values only (:func:`narad.jsonschema.register`'s
``embedded``); any other ``$ref`` leading outside the document is refused as
always.

The histories store the schema as given; the bundle is what registration
checks, the validator compiles and compatibility compares. It is bounded
by the rulebook's size and depth of a document (256 KiB, 64 levels), which
the bundle counts as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urljoin

from narad import jsontext
from narad.errors import InvalidSchema
from narad.jsonschema import SCHEMA_DEPTH
from narad.jsonschema import Draft
from narad.quoting import quote
from narad.schematypes import Reference
from narad.schematypes import walk_references

__all__ = ("EMBEDDED_PREFIX", "bundle", "dump")

#: The ``$id`` of the n-th embedded document is this followed by n.
EMBEDDED_PREFIX = "narad://reference/"
# Keywords whose values are data, not schemas: a "$ref" member there is not
# a reference.
_DATA = frozenset({"const", "default", "enum", "examples"})
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")


def bundle(
    document: Any,
    references: tuple[Reference, ...],
    draft: Draft,
    drafts: Mapping[str, Draft],
) -> tuple[Any, frozenset[str]]:
    """``document`` with its references embedded, and their ``$id`` values.

    ``draft``: the document's; ``drafts``: the node's by ``$schema`` URI. A
    referenced document naming the same draft (by any of its URIs) loses its
    ``$schema``, one document having one draft; one naming another is
    refused. A document that is no object (``true``) refers to nothing and
    is given back as is.

    Raises:
        InvalidSchema: a referenced document does not parse or is of another
            draft, or the document's ``$defs`` is not an object.
    """
    id_keyword = draft.id_keyword
    if not isinstance(document, dict) or not references:
        return document, frozenset()
    ordered = walk_references(references)
    uris = {
        (r.subject, r.version): f"{EMBEDDED_PREFIX}{n}" for n, r in enumerate(ordered)
    }
    defs: dict[str, Any] = {}
    for reference in ordered:
        try:
            embedded = jsontext.loads(
                reference.document, max_depth=SCHEMA_DEPTH, allow_duplicate_keys=True
            )
        except jsontext.JSONTextError as exc:
            raise InvalidSchema(
                f"schema: reference {quote(reference.name)}: {exc}"
            ) from None
        if not isinstance(embedded, dict):
            embedded = {} if embedded is True else {"not": {}}
        named = embedded.get("$schema")
        if named is not None:
            theirs = drafts.get(named) if isinstance(named, str) else None
            if theirs is None or theirs.name != draft.name:
                shown = theirs.name if theirs is not None else quote(str(named))
                raise InvalidSchema(
                    f"schema: reference {quote(reference.name)} is written in "
                    f"draft {shown} and the schema in draft {draft.name}: a "
                    "schema and the documents it references are one draft"
                )
        embedded = _rewrite(embedded, reference.references, uris, id_keyword)
        embedded.pop("$schema", None)
        embedded[id_keyword] = uris[(reference.subject, reference.version)]
        defs[f"{reference.subject} version {reference.version}"] = embedded
    main = _rewrite(document, references, uris, id_keyword)
    given = main.get("$defs", {})
    if not isinstance(given, dict):
        raise InvalidSchema(
            "schema: /$defs must be an object: a schema with references gets "
            "them embedded there"
        )
    main["$defs"] = {**given, **defs}
    return main, frozenset(uris.values())


def _rewrite(
    document: dict[str, Any],
    references: tuple[Reference, ...],
    uris: dict[tuple[str, int], str],
    id_keyword: str,
) -> dict[str, Any]:
    """A copy of ``document`` with each ``$ref`` that names one of its
    ``references`` naming the embedded copy instead."""
    base = document.get(id_keyword)
    base = base.partition("#")[0] if isinstance(base, str) else ""
    targets: dict[str, str] = {}
    for reference in references:
        uri = uris[(reference.subject, reference.version)]
        targets.setdefault(reference.name.partition("#")[0], uri)
        if base:
            targets.setdefault(urljoin(base, reference.name.partition("#")[0]), uri)

    def target(ref: str) -> str | None:
        part, hash_, fragment = ref.partition("#")
        if not part:
            return None
        found = targets.get(part)
        if found is None and base:
            found = targets.get(urljoin(base, part))
        if found is None:
            return None
        return found + hash_ + fragment

    return _copy(document, target)


def _copy(value: Any, target: Any) -> Any:
    """A deep copy of ``value`` with references mapped through ``target``
    (iterative: a document nests at most 64 levels, but no recursion is
    needed)."""
    root: dict[str, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, copy = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, dict | list) and not (
                isinstance(source, dict) and key in _DATA
            ):
                child: dict[str, Any] | list[Any] = {} if isinstance(item, dict) else []
                stack.append((item, child))
                item = child
            elif (
                isinstance(source, dict)
                and key in _REFS
                and isinstance(item, str)
                and (mapped := target(item)) is not None
            ):
                item = mapped
            if isinstance(copy, dict):
                copy[key] = item
            else:
                copy.append(item)
    return root


def dump(value: Any) -> bytes:
    """Compact JSON text of a parsed document, numbers exact (``jsontext``
    reads them as int and Decimal)."""
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            parts.append(item)
        elif isinstance(item, dict):
            stack.append(_Text("}"))
            members = list(item.items())
            for n, (key, member) in enumerate(reversed(members)):
                stack.append(member)
                comma = "," if n < len(members) - 1 else ""
                stack.append(_Text(comma + json.dumps(key, ensure_ascii=False) + ":"))
            stack.append(_Text("{"))
        elif isinstance(item, list):
            stack.append(_Text("]"))
            for n, member in enumerate(reversed(item)):
                stack.append(member)
                if n < len(item) - 1:
                    stack.append(_Text(","))
            stack.append(_Text("["))
        elif isinstance(item, Decimal):
            parts.append(str(item))
        else:
            parts.append(json.dumps(item, ensure_ascii=False))
    return "".join(parts).encode("utf-8", "surrogatepass")


class _Text(str):
    """Literal text in :func:`dump`'s stack (not a JSON string to quote)."""
