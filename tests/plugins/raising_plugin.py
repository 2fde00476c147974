"""A test plugin whose format checker and compatibility rule raise on input."""

from narad import hookimpl
from narad.compatibility import extension


def is_calm(value: str) -> bool:
    if value.startswith("boom"):
        raise RuntimeError("checker crashed")
    return True


@extension
def x_calm(old, new, ctx):
    if old != new:
        raise KeyError("rule crashed")
    return ()


@hookimpl
def narad_format_checkers():
    return {"x-calm": is_calm}


@hookimpl
def narad_compatibility_rules():
    return {"x-calm": x_calm}
