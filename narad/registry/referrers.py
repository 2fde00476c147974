"""Which schemas reference a version: the registry's ``referencedby``, and
what keeps a referenced version from being deleted.

References are stored with each version that has them, not beside the
version they name, so the index is built here, per process, from the global
ids: an id stands for one document with one list of references for good
(:func:`narad.schema.service.fingerprint` digests both), so what an id
references is read once, and only ids assigned since the last look (and
those no version held then, whose references the storage drops until one
holds them again) are read again. Which versions hold an id changes, so a
candidate's holders are read fresh on every question.
"""

from __future__ import annotations

from narad.schema.references import reference_items
from narad.storage import Storage
from narad.storage import StoredSchema

__all__ = ("Referrers",)


class Referrers:
    """The ids referencing each (subject, version), read incrementally.

    No lock: two greenlets reading the same ids add the same entries."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._next = 1
        self._by_target: dict[tuple[str, int], set[int]] = {}
        self._unheld: set[int] = set()

    def candidates(self, subject: str, version: int) -> list[StoredSchema]:
        """The schemas whose references name version ``version`` of
        ``subject``, as stored now (with their holders); some may be held by
        no version any more."""
        self._refresh()
        found = []
        for schema_id in sorted(self._by_target.get((subject, version), ())):
            stored = self.storage.schema_by_id(schema_id)
            if stored is not None and stored.document:
                found.append(stored)
        return found

    def _refresh(self) -> None:
        for schema_id in sorted(self._unheld):
            self._unheld.discard(schema_id)
            self._read(schema_id)
        number = self._next
        while self._read(number):
            number += 1
        self._next = max(self._next, number)

    def _read(self, schema_id: int) -> bool:
        """Index id ``schema_id``; False when it was never assigned."""
        stored = self.storage.schema_by_id(schema_id)
        if stored is None:
            return False
        if not stored.document:
            self._unheld.add(schema_id)
            return True
        for _, subject, version in reference_items(stored.references):
            self._by_target.setdefault((subject, version), set()).add(schema_id)
        return True
