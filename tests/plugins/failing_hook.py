"""A test plugin whose hook raises when called."""

from narad import hookimpl


@hookimpl
def narad_format_checkers():
    raise RuntimeError("checker table is corrupt")
