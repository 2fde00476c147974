"""What ships, found rather than listed: the ``narad`` packages, every built-in
plugin package under ``plugins/`` and their data files (setup.cfg holds the
rest of the metadata). The C helper is optional: without a compiler the
install goes on without it (narad/datastack.py says when it matters)."""

from setuptools import Extension
from setuptools import find_packages
from setuptools import setup

PLUGINS = "plugins"
# Each built-in plugin is a top-level package of its own under plugins/; the
# example plugin there is a separate distribution (plugins/narad-example).
plugin_packages = find_packages(PLUGINS, include=["narad_*"])

setup(
    packages=find_packages(include=["narad", "narad.*"]) + plugin_packages,
    package_dir={
        name: f"{PLUGINS}/{name}" for name in plugin_packages if "." not in name
    },
    ext_modules=[
        Extension("narad._datastack", sources=["narad/_datastack.c"], optional=True)
    ],
)
