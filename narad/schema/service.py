"""The schema service: registration, histories, and validation on produce.

Compiled validators are cached per process by (topic, epoch, version): a
produce neither re-reads the schema document nor recompiles it, and a topic
deleted and created again under the same name (new epoch) never reuses the
old one's validators.

Registration, compatibility checks, compiling and costly validations run via
:func:`narad.offload.run` (native threads with big stacks, off the event
loop); validating a small payload against a schema that is not high-cost
stays inline, where it takes microseconds and no thread hand-off.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from narad import offload
from narad.errors import Conflict
from narad.errors import IncompatibleSchema
from narad.errors import InvalidSchema
from narad.errors import NotFound
from narad.errors import SchemaVersionConflict
from narad.errors import TopicNotFound
from narad.plugins import Plugins
from narad.schema import compatibility
from narad.schema import jsontext
from narad.schema.capacity import ValidationCapacity
from narad.schema.drafts import Draft
from narad.schema.registration import RegisteredSchema
from narad.schema.registration import register
from narad.schema.validator import Validator
from narad.storage import SchemaVersion
from narad.storage import SchemaWriteResult
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

MIB = 1024 * 1024
TOPIC_BUDGET = 4 * MIB
CLUSTER_BUDGET = 256 * MIB
MAX_VERSIONS = 1000
LARGE_PAYLOAD = 16 * 1024
CACHED_VALIDATORS = 1024
CHANGE_ATTEMPTS = 8


class SchemaService:
    def __init__(
        self,
        plugins: Plugins,
        storage: Storage,
        capacity: ValidationCapacity,
        *,
        topic_budget: int = TOPIC_BUDGET,
        cluster_budget: int = CLUSTER_BUDGET,
    ) -> None:
        self.storage = storage
        self.capacity = capacity
        self.drafts, self.default_draft = plugins.drafts()
        self.formats = plugins.format_checkers()
        self.rules = plugins.compatibility_rules()
        self.topic_budget = topic_budget
        self.cluster_budget = cluster_budget
        self._validators: OrderedDict[tuple[str, str, int], Validator] = OrderedDict()

    # -- registration --------------------------------------------------------

    def register(self, raw: bytes) -> RegisteredSchema:
        return offload.run(
            register, raw, drafts=self.drafts, default_draft=self.default_draft
        )

    def budgets(self) -> tuple[int, int]:
        return self.topic_budget, self.cluster_budget

    def raise_for_budget(self, result: SchemaWriteResult, topic: str) -> None:
        if result.status is Status.TOPIC_BUDGET:
            message = (
                f"schema: topic budget exceeded: topic {topic} stores "
                f"{result.stored_bytes} bytes of schema versions and may store at "
                f"most {self.topic_budget} bytes"
            )
            if result.stored_bytes > self.topic_budget:
                message += (
                    "; the history is already over the budget, so smaller "
                    "versions cannot help: put the new schema on a new topic"
                )
            raise Conflict(message)
        if result.status is Status.CLUSTER_BUDGET:
            raise Conflict(
                f"schema: cluster budget exceeded: the cluster stores "
                f"{result.cluster_bytes} bytes of schemas and may store at most "
                f"{self.cluster_budget} bytes; delete topics to make room"
            )

    # -- changes -------------------------------------------------------------

    def change(self, meta: TopicMeta, raw: bytes, base_version: int | None) -> bool:
        """Register ``raw`` as the next version; False when it is no change."""
        if raw == b"null":
            raise InvalidSchema(
                "schema: a schema cannot be removed (null); it can only be widened"
            )
        new = self.register(raw)
        for _ in range(CHANGE_ATTEMPTS):
            current = meta.schema_version
            if base_version is not None and current != base_version:
                raise SchemaVersionConflict()
            if current and not self._is_change(meta, current, new):
                return False
            result = self.storage.append_schema(
                meta,
                SchemaVersion(current + 1, new.compact, new.high_cost),
                expected_current=current,
                budget=self.budgets(),
                max_versions=MAX_VERSIONS,
            )
            if result.status is Status.OK:
                return True
            if result.status is Status.TOO_MANY_VERSIONS:
                raise Conflict(
                    f"schema: topic {meta.name} holds {MAX_VERSIONS} versions, "
                    "the most a topic may hold"
                )
            if result.status is Status.NO_TOPIC:
                raise TopicNotFound(meta.name)
            self.raise_for_budget(result, meta.name)
            # BASE_MISMATCH: another change landed first; check against it.
            meta = self._reload(meta.name)
        raise SchemaVersionConflict()

    def _is_change(self, meta: TopicMeta, current: int, new: RegisteredSchema) -> bool:
        old_doc = self._document(meta.name, current)
        problems = offload.run(self._compare, old_doc, new)
        if problems is None:
            return False
        if problems:
            listed = "; ".join(str(p) for p in problems[:8])
            raise IncompatibleSchema(
                f"schema: incompatible with version {current}: {listed}"
            )
        return True

    def _compare(self, old_doc: Any, new: RegisteredSchema) -> list | None:
        """None when ``new`` changes nothing that matters, else its problems."""
        old_draft = self.draft_of(old_doc)
        if jsontext.json_equal(old_doc, new.document):
            return None
        if compatibility.annotations_only_change(
            old_doc, new.document, draft=old_draft
        ):
            return None
        return compatibility.check(
            old_doc,
            new.document,
            old_draft=old_draft,
            new_draft=new.draft,
            rules=self.rules,
        )

    def _reload(self, name: str) -> TopicMeta:
        meta = self.storage.get_topic(name)
        if meta is None:
            raise TopicNotFound(name)
        return meta

    # -- reading histories ---------------------------------------------------

    def stored(self, name: str, version: int) -> SchemaVersion:
        found = self.storage.get_schema(name, version)
        if found is None:
            raise NotFound(f"topic {name} has no schema version {version}")
        return found

    def sizes(self, name: str) -> list[tuple[int, int]]:
        """(version, stored bytes) for every version of ``name``'s history."""
        return self.storage.schema_sizes(name)

    def _document(self, name: str, version: int) -> Any:
        # A version stored before repeated keys were refused may hold one.
        return jsontext.loads(
            self.stored(name, version).document,
            max_depth=64,
            allow_duplicate_keys=True,
        )

    def draft_of(self, document: Any) -> Draft:
        if isinstance(document, dict) and isinstance(document.get("$schema"), str):
            return self.drafts[document["$schema"]]
        return self.default_draft

    def forget(self, name: str) -> None:
        for key in [k for k in self._validators if k[0] == name]:
            del self._validators[key]

    # -- validation on produce -----------------------------------------------

    def payload_check(self, meta: TopicMeta) -> Callable[[bytes], None]:
        """The check for a produce to ``meta`` at its current schema version."""
        validator = self._validator(meta)
        if meta.schema_high_cost:
            return lambda payload: self._bounded(validator, payload)

        def check(payload: bytes) -> None:
            if len(payload) > LARGE_PAYLOAD:
                self._bounded(validator, payload)
            else:
                # Inline: a 1 KiB payload takes ~6 us here against ~40 us of
                # CPU handed to a pool thread and back; with Python 3.11's
                # inlined calls even 256 levels of a 63-step schema need well
                # under a 64 KiB C stack (measured), so no big stack either.
                validator.validate(payload)

        return check

    def _bounded(self, validator: Validator, payload: bytes) -> None:
        with self.capacity.slot():
            offload.run(validator.validate, payload)

    def _validator(self, meta: TopicMeta) -> Validator:
        key = (meta.name, meta.epoch, meta.schema_version)
        validator = self._validators.get(key)
        if validator is not None:
            self._validators.move_to_end(key)
            return validator
        document = self._document(meta.name, meta.schema_version)
        validator = offload.run(
            Validator,
            document,
            draft=self.draft_of(document),
            drafts=self.drafts,
            formats=self.formats,
            schema_uri=f"narad://schema/{meta.name}/{meta.schema_version}",
        )
        self._validators[key] = validator
        if len(self._validators) > CACHED_VALIDATORS:
            self._validators.popitem(last=False)
        return validator
