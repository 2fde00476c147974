"""Users, grants, topic ownership and HTTP Basic authentication.

Security is on by default (``security.enabled``): every route but
``/healthz`` and ``/readyz`` needs HTTP Basic credentials of a stored user
(``/metrics`` those of a user with a ``metrics`` grant or admin on ``*``,
unless ``metrics.public``). The parts, each in its own module:

- :mod:`~narad.security.grants`: actions, patterns, and what a user's grants
  allow and cover;
- :mod:`~narad.security.passwords`: scrypt hashes;
- :mod:`~narad.security.authn`: checking credentials (cached, rate-limited,
  bounded);
- :mod:`~narad.security.limiter`: the failed-authentication limits (per
  user name from one address, per address, per user name);
- :mod:`~narad.security.access`: ``authorize(req, action, topic)``, the one
  call a resource makes per action;
- :mod:`~narad.security.users`: the Users API's service;
- :mod:`~narad.security.seed`: the root admin, on first start.

Users live in the storage beside the topics, written by its scripts
(:meth:`narad.storage.Storage.create_user` and the others).
"""
