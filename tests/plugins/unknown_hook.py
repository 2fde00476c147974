"""A test plugin implementing a hook Narad does not have."""

from narad import hookimpl


@hookimpl
def narad_no_such_hook():
    return {}
