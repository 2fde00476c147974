"""The rulebook's "Compatibility": may a schema change refuse a message?

:mod:`~narad.schema.compatibility.engine` compares two versions structurally
(every message the previous version accepted stays valid), calling the
keyword rules plugins register (their API is the public
:mod:`narad.compatibility`); :mod:`~narad.schema.compatibility.versions`
runs it against stored versions in a topic's mode (:mod:`narad.schema.modes`).
The history rules of the section (append-only, budgets, idempotency, the
conditional base version) hold for every schema type and live in the service
(:mod:`narad.schema.service`).
"""
