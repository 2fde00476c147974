"""Schema patterns: RE2 syntax, and a bound on what one costs per input byte.

``pattern`` and ``patternProperties`` use RE2 syntax (google-re2), so matching
runs in linear time. Linear time still pays, on every byte of the string, for
each partial match the pattern keeps alive and each assertion step it walks to
reach them; :func:`check_pattern` refuses a pattern that can cost more than
:data:`MAX_STEPS_PER_BYTE` such steps.

How the cost is estimated (:func:`pattern_cost`):

1. The pattern is parsed (after RE2 accepted it) into atoms, assertions,
   concatenations, alternations and repetitions, and compiled the way RE2
   compiles it: a Thompson program where ``x{n,m}`` is ``n`` copies of ``x``
   followed by ``m - n`` nested optional copies, ``x*`` and ``x+`` are one
   copy with a loop, and an assertion (``\\b``, ``\\B``, ``^``, ``$``,
   ``\\A``, ``\\z``) is an empty-width instruction.
2. Each atom's character class is evaluated by RE2 itself on a sample
   alphabet (every ASCII character and a few non-ASCII letters, digits and
   spaces), so flags, Unicode classes and case folding count as RE2 sees
   them. Characters no atom tells apart are one input symbol.
3. Matching is simulated as RE2 does, with one thread per instruction: after
   each input symbol the live threads are the consuming instructions still
   alive, and since ``pattern`` searches, a fresh thread enters the start at
   every byte. Assertions are assumed to pass (the worst case), except the
   begin-of-text ones, which pass only before the first byte.
4. The cost of one step is the number of threads alive after it plus the
   assertion instructions walked to reach them. The estimate is the largest
   step cost over every set of threads the simulation can reach (a breadth
   first search over those sets, stopping as soon as one exceeds the bound).

So an unanchored ``a.{1000}b`` reaches a set of a thousand live threads on
``aaa...``, ``(?:\\B){1000}x`` walks a thousand assertions at every byte, the
same patterns anchored with ``^`` keep one thread, and an unanchored UUID
pattern peaks at nine (eight starts inside the first group, and one further
on). A pattern with at most 32 instructions that consume or assert cannot
exceed the bound and is not simulated. The search is bounded: a program larger
than :data:`MAX_PROGRAM` instructions, or one whose search does not settle
within :data:`SEARCH_BUDGET` steps, is refused as too complex to bound.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import re2
from re2 import _re2

from narad.caches import BoundedCache

__all__ = (
    "MAX_GROUP_DEPTH",
    "MAX_PROGRAM",
    "MAX_STEPS_PER_BYTE",
    "SEARCHES",
    "SEARCH_BUDGET",
    "PatternError",
    "check_pattern",
    "compile_pattern",
    "pattern_cost",
    "regex_search",
)

MAX_STEPS_PER_BYTE = 32
MAX_PROGRAM = 20_000
SEARCH_BUDGET = 200_000
MAX_GROUP_DEPTH = 100

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would log every refusal to stderr
# Validation compiles with a smaller memory budget: RE2 keeps a lazily built
# DFA per pattern that payloads made to visit many states grow up to about
# two thirds of the budget (5 MiB of the default 8 MiB; 0.7 MiB of this
# one), then it resets or falls back to its NFA, in linear time either way
# (what the cost bound above counts). A program too large for this budget
# gets RE2's default instead, so validation accepts exactly what
# registration does.
VALIDATION_MAX_MEM = 1 << 20
_VALIDATION_OPTIONS = re2.Options()
_VALIDATION_OPTIONS.log_errors = False
_VALIDATION_OPTIONS.max_mem = VALIDATION_MAX_MEM
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED

# Characters every atom is tried on: all of ASCII, then non-ASCII letters
# (including the two that case-fold into ASCII), a digit, spaces, an emoji.
_SAMPLE = [chr(c) for c in range(128)] + list(
    "\u00a0\u00e9\u00c9\u0391\u03b1\u0660\u2028\u4e2d\u017f\u212a\U0001f600"
)
_ALL = (1 << len(_SAMPLE)) - 1

_CHAR, _SPLIT, _EMPTY, _ASSERT, _MATCH = range(5)
_BEGIN_TEXT = "begin"
_OTHER_ASSERTION = "other"

_CLASS_ESCAPES = set("dDsSwWpPC")
_ASSERT_ESCAPES = {"b": _OTHER_ASSERTION, "B": _OTHER_ASSERTION, "A": _BEGIN_TEXT}
_REPEAT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")


class PatternError(ValueError):
    """A pattern registration refuses; ``str()`` says why, without the pattern."""


def compile_pattern(pattern: str) -> Any:
    """Compile ``pattern`` with RE2.

    Raises:
        PatternError: not RE2 syntax; a lookaround or a backreference is named;
            or a lone surrogate (``"\\ud800"`` in JSON), which RE2's UTF-8
            cannot hold.
    """
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        raise PatternError(_why_not_re2(pattern)) from None
    except UnicodeEncodeError:
        # RE2 reads UTF-8, which has no lone surrogate ("\ud800" in JSON).
        raise PatternError(
            "holds a lone surrogate, which RE2 cannot take (patterns are UTF-8)"
        ) from None


#: Compiled searches by pattern text, shared by every validator of the
#: process: a pattern in a thousand topics' schemas is compiled once. The
#: bytes are RE2's program (not the DFA it builds while matching); bounds
#: from ``[cache] patterns`` and ``pattern_memory``.
SEARCHES: BoundedCache[str, tuple[Callable[[str], bool], int]] = BoundedCache(
    "patterns", max_entries=8192, max_bytes=16 << 20
)
# Registration's cost estimates, by pattern and by atom: keyed by text that
# can be long, so bounded by the bytes of their keys too.
_COSTS: BoundedCache[str, int] = BoundedCache(
    "pattern_costs", max_entries=4096, max_bytes=4 << 20
)
_MASKS: BoundedCache[tuple[str, str], int] = BoundedCache(
    "pattern_atoms", max_entries=8192, max_bytes=1 << 20
)
CACHES = (SEARCHES, _COSTS, _MASKS)


def regex_search(pattern: str) -> Callable[[str], bool]:
    """A function telling whether ``pattern`` (RE2) matches anywhere in a string.

    Shared: the same pattern gets the same function (see :data:`SEARCHES`).

    The public ``search`` maps byte offsets back to characters and builds a
    match object on every call; asking the compiled RE2 object directly for
    a match in the UTF-8 bytes costs a fraction of that (bench/validate.py's
    pattern rows), and a yes/no is all validation needs. A lone surrogate in the
    string (JSON's ``"\\ud800"``) goes in as its three bytes, which RE2 reads
    as the one character it is (``.`` and ``\\p{Cs}`` match it).

    Raises:
        PatternError: as :func:`compile_pattern`.
    """
    return shared_search(pattern)[0]


def shared_search(pattern: str) -> tuple[Callable[[str], bool], int]:
    """:func:`regex_search`'s function with an estimate of its bytes.

    Raises:
        PatternError: as :func:`compile_pattern`.
    """
    found = SEARCHES.get(pattern)
    if found is None:
        found = _search(pattern)
        SEARCHES.put(pattern, found, found[1] + len(pattern))
    return found


def _search(pattern: str) -> tuple[Callable[[str], bool], int]:
    try:
        compiled = re2.compile(pattern, _VALIDATION_OPTIONS)
    except (re2.error, UnicodeEncodeError):
        compiled = compile_pattern(pattern)  # RE2's default budget, or why not
    # Measured: about 1 KiB per compiled pattern, plus ~48 bytes per program
    # instruction (forward and reverse programs, RE2's tables).
    size = 1024 + 48 * getattr(compiled, "programsize", 64)
    regexp = getattr(compiled, "_regexp", None)
    if regexp is None:  # a google-re2 without the internal object
        return (lambda text: compiled.search(text) is not None), size
    match = regexp.Match
    unanchored = _UNANCHORED

    def search(text: str) -> bool:
        data = text.encode("utf-8", "surrogatepass")
        return match(unanchored, data, 0, len(data))[0][0] >= 0

    return search, size


def _why_not_re2(pattern: str) -> str:
    if re.search(r"\(\?<?[=!]", pattern):
        return "uses a lookaround, which RE2 syntax does not have"
    if re.search(r"\\[1-9]|\\k<|\(\?P=", pattern):
        return "uses a backreference, which RE2 syntax does not have"
    return "is not valid RE2 syntax"


def check_pattern(pattern: str) -> None:
    """Refuse a pattern that is not RE2 or that can cost too much per byte."""
    compile_pattern(pattern)
    cost = pattern_cost(pattern)
    if cost > MAX_STEPS_PER_BYTE:
        raise PatternError(
            f"can cost more than {MAX_STEPS_PER_BYTE} steps per input byte"
        )


def pattern_cost(pattern: str) -> int:
    """Estimate the steps per input byte of an RE2-valid ``pattern``.

    Returns a number above :data:`MAX_STEPS_PER_BYTE` as soon as the estimate
    exceeds it, and for a pattern too complex to bound (see the module doc).
    """
    cost = _COSTS.get(pattern)
    if cost is None:
        cost = _pattern_cost(pattern)
        _COSTS.put(pattern, cost, 100 + len(pattern))
    return cost


def _pattern_cost(pattern: str) -> int:
    try:
        tree = _Parser(pattern).parse()
        program = _Program()
        start = program.compile(tree)
    except _TooComplex:
        return MAX_STEPS_PER_BYTE + 1
    if program.weight <= MAX_STEPS_PER_BYTE:
        return program.weight
    return _simulate(program, start)


class _TooComplex(Exception):
    pass


# -- Parsing -------------------------------------------------------------------
#
# Nodes are tuples: ("char", mask), ("assert", kind), ("cat", [nodes]),
# ("alt", [nodes]), ("rep", node, min, max or None). RE2 already accepted the
# pattern, so the parser only needs its structure.


@dataclass
class _Frame:
    flags: str
    branches: list[list[Any]] = field(default_factory=lambda: [[]])


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0

    def parse(self) -> Any:
        stack = [_Frame(flags="")]
        text = self.text
        while self.pos < len(text):
            frame = stack[-1]
            char = text[self.pos]
            if char == "(":
                self._open(stack)
            elif char == ")":
                self.pos += 1
                done = stack.pop()
                stack[-1].branches[-1].append(_alt(done.branches))
            elif char == "|":
                self.pos += 1
                frame.branches.append([])
            elif char in "*+?{" and self._repeat(frame.branches[-1]):
                pass
            else:
                frame.branches[-1].append(self._atom(frame.flags))
        return _alt(stack[0].branches)

    def _open(self, stack: list[_Frame]) -> None:
        if len(stack) > MAX_GROUP_DEPTH:
            raise _TooComplex
        text, flags = self.text, stack[-1].flags
        self.pos += 1
        if text.startswith("?", self.pos):
            end = self.pos + 1
            while text[end] not in ":)<":
                end += 1
            if text[end] == "<" or text.startswith("P<", self.pos + 1):
                self.pos = text.index(">", self.pos) + 1
            else:
                flags = _apply_flags(flags, text[self.pos + 1 : end])
                self.pos = end + 1
                if text[end] == ")":
                    # (?i) changes the flags of the rest of the enclosing group.
                    stack[-1].flags = flags
                    return
        stack.append(_Frame(flags=flags))

    def _repeat(self, items: list[Any]) -> bool:
        text = self.text
        if text[self.pos] == "{":
            match = _REPEAT.match(text, self.pos)
            if match is None or match.group(1) == "":
                return False
            low = int(match.group(1))
            high: int | None = low
            if match.group(2):
                high = int(match.group(3)) if match.group(3) else None
            self.pos = match.end()
        else:
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[text[self.pos]]
            self.pos += 1
        if self.pos < len(text) and text[self.pos] == "?":
            self.pos += 1  # a lazy repetition costs the same
        items.append(("rep", items.pop(), low, high))
        return True

    def _atom(self, flags: str) -> Any:
        text, start = self.text, self.pos
        char = text[start]
        if char == "^":
            self.pos += 1
            return ("assert", _OTHER_ASSERTION if "m" in flags else _BEGIN_TEXT)
        if char == "$":
            self.pos += 1
            return ("assert", _OTHER_ASSERTION)
        if char == "[":
            self.pos = _class_end(text, start)
        elif char == "\\":
            return self._escape(flags)
        else:
            self.pos += 1
        return ("char", _mask(text[start : self.pos], flags))

    def _escape(self, flags: str) -> Any:
        text, start = self.text, self.pos
        kind = text[start + 1]
        self.pos = start + 2
        if kind in _ASSERT_ESCAPES:
            return ("assert", _ASSERT_ESCAPES[kind])
        if kind == "z":
            return ("assert", _OTHER_ASSERTION)
        if kind == "Q":
            end = text.find("\\E", self.pos)
            end = len(text) if end < 0 else end
            quoted = text[self.pos : end]
            self.pos = min(end + 2, len(text))
            return ("cat", [("char", _mask(re.escape(c), flags)) for c in quoted])
        if (kind in "pP" and text[self.pos] == "{") or (
            kind == "x" and text[self.pos] == "{"
        ):
            self.pos = text.index("}", self.pos) + 1
        elif kind in "pP":
            self.pos += 1
        elif kind == "x":
            self.pos += 2
        elif kind in "01234567":
            while self.pos < min(start + 4, len(text)) and text[self.pos] in "01234567":
                self.pos += 1
        return ("char", _mask(text[start : self.pos], flags))


def _class_end(text: str, start: int) -> int:
    pos = start + 1
    if text.startswith("^", pos):
        pos += 1
    if text.startswith("]", pos):
        pos += 1
    while text[pos] != "]":
        if text.startswith("[:", pos):
            pos = text.index(":]", pos + 2) + 2
        elif text[pos] == "\\":
            pos = _escape_end(text, pos)
        else:
            pos += 1
    return pos + 1


def _escape_end(text: str, pos: int) -> int:
    kind = text[pos + 1]
    if kind in "pPx" and text.startswith("{", pos + 2):
        return text.index("}", pos) + 1
    return pos + (3 if kind in "pP" else 4 if kind == "x" else 2)


def _apply_flags(flags: str, spec: str) -> str:
    on, _, off = spec.partition("-")
    return "".join(sorted((set(flags) | set(on)) - set(off)))


def _alt(branches: list[list[Any]]) -> Any:
    options = [("cat", items) for items in branches]
    return options[0] if len(options) == 1 else ("alt", options)


def _mask(atom: str, flags: str) -> int:
    """The sample characters ``atom`` matches under ``flags``, as a bit mask."""
    mask = _MASKS.get((atom, flags))
    if mask is None:
        mask = _atom_mask(atom, flags)
        _MASKS.put((atom, flags), mask, 150 + len(atom) + len(flags))
    return mask


def _atom_mask(atom: str, flags: str) -> int:
    regex = re2.compile(f"(?{flags}:{atom})" if flags else atom, _OPTIONS)
    mask = 0
    for bit, sample in enumerate(_SAMPLE):
        if regex.fullmatch(sample):
            mask |= 1 << bit
    return mask


# -- Compiling -----------------------------------------------------------------


class _Program:
    """A Thompson program: parallel lists indexed by instruction."""

    def __init__(self) -> None:
        self.op: list[int] = []
        self.arg: list[Any] = []
        self.out: list[int] = []
        self.out1: list[int] = []
        self.weight = 0  # instructions that consume or assert

    def emit(self, op: int, arg: Any = None) -> int:
        if len(self.op) >= MAX_PROGRAM:
            raise _TooComplex
        self.op.append(op)
        self.arg.append(arg)
        self.out.append(-1)
        self.out1.append(-1)
        if op in (_CHAR, _ASSERT):
            self.weight += 1
        return len(self.op) - 1

    def compile(self, tree: Any) -> int:
        start, holes = self.fragment(tree)
        self.patch(holes, self.emit(_MATCH))
        return start

    def patch(self, holes: list[tuple[int, int]], target: int) -> None:
        for instruction, slot in holes:
            (self.out if slot == 0 else self.out1)[instruction] = target

    def fragment(self, node: Any) -> tuple[int, list[tuple[int, int]]]:
        """Compile ``node``; return its entry and its unpatched exits."""
        kind = node[0]
        if kind in ("char", "assert"):
            pc = self.emit(_CHAR if kind == "char" else _ASSERT, node[1])
            return pc, [(pc, 0)]
        if kind == "cat":
            return self.sequence(
                [lambda item=item: self.fragment(item) for item in node[1]]
            )
        if kind == "alt":
            return self.alternation(node[1])
        return self.repetition(node[1], node[2], node[3])

    def sequence(self, parts: list[Any]) -> tuple[int, list[tuple[int, int]]]:
        entry = self.emit(_EMPTY)
        holes = [(entry, 0)]
        for part in parts:
            start, exits = part()
            self.patch(holes, start)
            holes = exits
        return entry, holes

    def alternation(self, options: list[Any]) -> tuple[int, list[tuple[int, int]]]:
        first, holes = self.fragment(options[0])
        for option in options[1:]:
            split = self.emit(_SPLIT)
            start, exits = self.fragment(option)
            self.out[split], self.out1[split] = first, start
            first, holes = split, holes + exits
        return first, holes

    def repetition(
        self, body: Any, low: int, high: int | None
    ) -> tuple[int, list[tuple[int, int]]]:
        copies = low if high is not None else max(low - 1, 0)
        parts: list[Any] = [lambda: self.fragment(body) for _ in range(copies)]
        if high is None:
            # x* is one looping copy; x{n,} is n - 1 copies, then x+.
            parts.append(lambda: self.loop(body, at_least_once=low > 0))
        else:
            parts.extend(lambda: self.optional(body) for _ in range(high - low))
        return self.sequence(parts)

    def loop(
        self, body: Any, *, at_least_once: bool
    ) -> tuple[int, list[tuple[int, int]]]:
        split = self.emit(_SPLIT)
        start, exits = self.fragment(body)
        self.out[split] = start
        self.patch(exits, split)
        return (start if at_least_once else split), [(split, 1)]

    def optional(self, body: Any) -> tuple[int, list[tuple[int, int]]]:
        split = self.emit(_SPLIT)
        start, exits = self.fragment(body)
        self.out[split] = start
        return split, [*exits, (split, 1)]


# -- Simulating ----------------------------------------------------------------


def _symbols(program: _Program) -> list[int]:
    """One sample bit per class of characters the program cannot tell apart."""
    masks = sorted({program.arg[pc] for pc, op in enumerate(program.op) if op == _CHAR})
    seen: dict[tuple[bool, ...], int] = {}
    for bit in range(len(_SAMPLE)):
        seen.setdefault(tuple(bool(mask >> bit & 1) for mask in masks), bit)
    return list(seen.values())


def _closure(
    program: _Program, entries: list[int], *, at_start: bool
) -> tuple[frozenset[int], int, int]:
    """Threads reached from ``entries`` without consuming: (threads, asserts, work)."""
    threads: set[int] = set()
    visited: set[int] = set()
    asserts = 0
    stack = list(entries)
    while stack:
        pc = stack.pop()
        if pc in visited:
            continue
        visited.add(pc)
        op = program.op[pc]
        if op == _CHAR:
            threads.add(pc)
        elif op == _SPLIT:
            stack.extend((program.out[pc], program.out1[pc]))
        elif op == _EMPTY:
            stack.append(program.out[pc])
        elif op == _ASSERT:
            asserts += 1
            if at_start or program.arg[pc] != _BEGIN_TEXT:
                stack.append(program.out[pc])
    return frozenset(threads), asserts, len(visited)


def _step(
    program: _Program, start: int, threads: frozenset[int], bit: int
) -> tuple[frozenset[int], int, int]:
    """Consume one symbol; a search starts a fresh thread at every byte."""
    entries = [start]
    entries += [program.out[pc] for pc in threads if program.arg[pc] >> bit & 1]
    following, asserts, work = _closure(program, entries, at_start=False)
    return following, len(following) + asserts, work


def _simulate(program: _Program, start: int) -> int:
    symbols = _symbols(program)
    initial, _, work = _closure(program, [start], at_start=True)
    # Runs of one symbol ("aaa...") find most costly patterns in a few steps.
    worst = 0
    for bit in symbols:
        threads, seen = initial, {initial}
        while True:
            threads, cost, steps = _step(program, start, threads, bit)
            worst, work = max(worst, cost), work + steps
            if worst > MAX_STEPS_PER_BYTE or work > SEARCH_BUDGET:
                return MAX_STEPS_PER_BYTE + 1
            if threads in seen:
                break
            seen.add(threads)
    # Then every reachable set of threads, breadth first.
    seen = {initial}
    queue = deque([initial])
    while queue:
        threads = queue.popleft()
        for bit in symbols:
            following, cost, steps = _step(program, start, threads, bit)
            worst, work = max(worst, cost), work + steps
            if worst > MAX_STEPS_PER_BYTE or work > SEARCH_BUDGET:
                return MAX_STEPS_PER_BYTE + 1
            if following not in seen:
                seen.add(following)
                queue.append(following)
    return worst
