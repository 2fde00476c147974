"""Helpers for format-checker plugins (public).

A format plugin answers ``narad_format_checkers`` (:mod:`narad.hookspecs`)
with a map of format name to ``checker(value: str) -> bool``. A checker runs
on payload text, so it must run in time linear in the string: build its
grammar from RE2 patterns, never a backtracking ``re``. These are the ones
the validator's ``pattern`` keyword uses:

- :func:`regex_search`: a shared function telling whether an RE2 pattern
  matches anywhere in a string (anchor it with ``^(?:...)$`` for a whole
  value);
- :func:`compile_pattern`: the compiled RE2 object, for what a yes/no cannot
  answer;
- :class:`PatternError`: what both raise for a pattern RE2 refuses
  (a lookaround, a backreference, a lone surrogate).

Covered by the compatibility promise (docs/plugins.md).
"""

from __future__ import annotations

from narad.schema.patterns import PatternError
from narad.schema.patterns import compile_pattern
from narad.schema.patterns import regex_search

__all__ = ("PatternError", "compile_pattern", "regex_search")
