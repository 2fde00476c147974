"""gunicorn settings for a Narad node, for running gunicorn by hand or from systemd:

    NARAD_STORAGE_URL=redis://127.0.0.1:6379/0 \
    PROMETHEUS_MULTIPROC_DIR=/run/narad/metrics \
        gunicorn -c conf/gunicorn.conf.py 'narad.serve.wsgi:get_app()'

The values come from Narad's own configuration (NARAD_CONFIG and NARAD_*),
exactly as `narad serve` uses them. A hand-run gunicorn needs a storage URL:
only `narad serve` starts the embedded server.
"""

from narad.serve.server import hand_run_settings

globals().update(hand_run_settings())
wsgi_app = "narad.serve.wsgi:get_app()"
