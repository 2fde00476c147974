"""The rulebook's "Schema documents": what a schema must be to be registered.

:mod:`~narad.schema.registration.documents` applies the section's rules in
order (:func:`~narad.schema.registration.documents.register`) and re-checks a
stored version (:func:`~narad.schema.registration.documents.check_stored`);
:mod:`~narad.schema.registration.metaschema` is a draft's meta-schema check,
linear in the document; :mod:`~narad.schema.registration.shapes` finds the
three shapes the section refuses because of how the validator evaluates them.
"""
