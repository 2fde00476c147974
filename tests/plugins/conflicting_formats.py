"""A test plugin that claims a format a built-in already provides."""

from narad import hookimpl


@hookimpl
def narad_format_checkers():
    return {"email": lambda value: True}
