"""Deprecated alias of :mod:`narad.serve.offload`, kept only while
``narad/schema/service.py`` still imports ``narad.offload``: delete it once
nothing does (``git grep -n "from narad import offload"``)."""

from narad.serve.offload import run
from narad.serve.offload import start

__all__ = ["run", "start"]
