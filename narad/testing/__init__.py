"""What a plugin author needs to test a Narad plugin.

- :mod:`narad.testing.compatibility`: check a pair of schema texts with the
  installed plugins, as a schema change is checked.
"""
