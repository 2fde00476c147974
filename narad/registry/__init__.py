"""Confluent Schema Registry's REST API over Narad's schema histories.

A subject ``<topic>-value`` of a topic that exists is that topic's history
(:mod:`narad.schema.service` writes it, with every rule of a PATCH); any other
subject is a standalone history the storage keeps beside the topics, checked
by the same engine, rules and budgets (:mod:`narad.registry.subjects`).
:mod:`narad.registry.service` answers the API's questions over both;
:mod:`narad.registry.errors` holds Confluent's error codes.
"""
