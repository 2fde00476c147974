"""The schema engine and the schema service (internal; see docs/layout.md).

The engine is laid out by the rulebook's sections
(``seeds/narad-schema-rules.txt``), one subpackage each:

- :mod:`narad.schema.validation`: "Validation on produce", the compiled
  JSON Schema validator;
- :mod:`narad.schema.registration`: "Schema documents", what a schema
  document must be before a topic stores it;
- :mod:`narad.schema.compatibility`: "Compatibility", the structural check
  between versions and JSON Schema's compatibility modes.

The rest is shared, by those three or by every schema type:

- :mod:`~narad.schema.service`: the type-agnostic schema service (histories,
  budgets, modes, children, validation on produce through a type's compiled
  check);
- :mod:`~narad.schema.modes`: the compatibility modes and the report a type's
  check answers in;
- :mod:`~narad.schema.capacity`: the per-node validation capacity bound
  ("Validation capacity");
- :mod:`~narad.schema.deadline`: the deadline of costly schema work;
- :mod:`~narad.schema.limits`: how deep documents and payloads may nest;
- :mod:`~narad.schema.drafts`: the record a draft plugin contributes;
- :mod:`~narad.schema.resolver`: an index of one document (subschemas,
  base URIs, anchors, where references lead), shared by the three engines;
- :mod:`~narad.schema.patterns`: RE2 patterns and their cost bound, checked
  at registration and run by the validator and the compatibility rules;
- :mod:`~narad.schema.graphs`: graph algorithms the validator's compiler and
  registration's shape analysis share.

Plugins import none of this: what they need is public in named modules
(:mod:`narad.drafts`, :mod:`narad.formats`, :mod:`narad.compatibility`,
:mod:`narad.jsontext`, :mod:`narad.jsonschema`, :mod:`narad.schematypes`),
and ``tests/unit/test_layout.py`` holds them to it.
"""
