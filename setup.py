"""The package is described in setup.cfg; only its C helper, which setup.cfg
cannot declare, is here (narad/_datastack.c says why it exists)."""

from setuptools import Extension
from setuptools import setup

setup(ext_modules=[Extension("narad._datastack", sources=["narad/_datastack.c"])])
