"""The gunicorn runtime: how a node runs the app, not what the app does.

The app (:mod:`narad.app`) and everything below it know nothing of this
package; it sits on top of them:

- :mod:`narad.serve.server`: the gunicorn application ``narad serve`` runs,
  its settings and hooks, TLS, the node's settings as the master resolved
  them (:func:`~narad.serve.server.node_config`).
- :mod:`narad.serve.wsgi`: ``get_app()``, what gunicorn loads in each worker
  (``gunicorn 'narad.serve.wsgi:get_app()'``).
- :mod:`narad.serve.workers`: the gevent worker class: connections, time
  limits, refusals, the response path.
- :mod:`narad.serve.plain`: the short path for plain HTTP/1.1 request heads
  (``server.plain_requests``).
- :mod:`narad.serve.offload`: native threads for CPU-bound work (hashes,
  validation) off the event loop.
- :mod:`narad.serve.embedded`: the private Valkey server ``narad serve``
  starts when no storage URL is set, and
  :mod:`narad.serve.supervisor`, which restarts it.
"""
