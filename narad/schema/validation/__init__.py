"""The rulebook's "Validation on produce": Narad's own JSON Schema validator.

:mod:`~narad.schema.validation.validator` checks a produced payload against a
stored version (exact numbers, Unicode lengths, RE2 patterns, formats on every
draft, a report cut to size), compiled once per version by
:mod:`~narad.schema.validation.compiler` into the keyword checks of
:mod:`~narad.schema.validation.keywords`. The strict JSON reader it parses
payloads with is :mod:`narad.jsontext`; the per-node bound on costly
validations ("Validation capacity") is :mod:`narad.schema.capacity`.
"""
