"""Compile ``.proto`` source text with protoc, in a bounded subprocess.

Why protoc, as shipped in ``grpcio-tools``: it is Google's own compiler (the
reference for what a ``.proto`` means: proto2, proto3 and editions, option
and type resolution, every error a client's own build would report, with
line and column), its wheels exist for CPython 3.11 manylinux x86_64 (no C
compiler at install), it carries the well-known types' ``.proto`` files, and
its release train moves with the ``protobuf`` runtime this plugin uses for
payloads. A pure-Python parser (``proto-schema-parser``) reads the syntax but
resolves no types and would accept files protoc refuses.

Why a subprocess: ``grpc_tools._protoc_compiler.run_main`` is protoc's C++
``main`` in-process. It holds the GIL for the whole compile, writes its
errors to the process's file descriptor 2, and nothing can stop it part way,
so a hostile file (deep nesting, a huge file of options) could pin a worker
or grow it without bound. A child process instead sets its own limits
before it loads the compiler (address space, CPU seconds, file size, no core
file) and the parent waits with a wall-clock timeout, killing it past that.
The child is ``python -I -c`` with a fixed driver, so no shell and no
environment variable reaches it; it costs tens of milliseconds, paid once
per registration, never per message. Its only inputs are a private temporary
directory holding the one file and the well-known types' directory (and,
for a schema with references, a ``FileDescriptorSet`` of the referenced
files): an ``import`` of anything else is "File not found" in protoc's own
words.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc_tools

from narad_protobuf.errors import ProtobufSchemaError

__all__ = ("FILE_NAME", "Limits", "compile_proto")

#: The name the compiled file gets (its ``FileDescriptorProto.name``).
FILE_NAME = "schema.proto"

#: Where grpcio-tools keeps ``google/protobuf/*.proto``.
WELL_KNOWN_INCLUDE = str(Path(grpc_tools.__file__).parent / "_proto")

#: How many of protoc's error lines a refusal quotes.
MAX_ERRORS = 5


@dataclass(frozen=True)
class Limits:
    """What one compile may use.

    Attributes:
        wall_seconds: Killed past this, whatever it is doing.
        cpu_seconds: RLIMIT_CPU of the child.
        memory_bytes: RLIMIT_AS of the child (the interpreter and protoc
            together use well under 64 MiB on ordinary files).
    """

    wall_seconds: float = 10.0
    cpu_seconds: int = 5
    memory_bytes: int = 256 << 20


DEFAULT_LIMITS = Limits()

# Runs in the child: limits first, then the compiler. argv: include dir, the
# well-known types' dir, the output file, cpu, memory, the file's name, and
# a FileDescriptorSet file of the imported files ("" for none).
_DRIVER = """
import resource, sys
inc, wkt, out, cpu, mem, name, deps = sys.argv[1:8]
resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 1))
resource.setrlimit(resource.RLIMIT_AS, (int(mem), int(mem)))
resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
from grpc_tools import _protoc_compiler
given = [b"--descriptor_set_in=" + deps.encode()] if deps else []
sys.exit(_protoc_compiler.run_main([
    b"protoc", b"-I" + inc.encode(), b"-I" + wkt.encode(), *given,
    b"--descriptor_set_out=" + out.encode(), b"--include_imports",
    name.encode(),
]))
"""

# How running out of RLIMIT_AS shows, in Python or in protoc.
_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "Cannot allocate memory")

# protoc's error lines: "schema.proto:3:14: message" (1-based line, column).
_LOCATED = re.compile(r"^" + re.escape(FILE_NAME) + r":(\d+):(\d+): (.*)$")


def compile_proto(
    source: str, limits: Limits = DEFAULT_LIMITS, dependencies: bytes = b""
) -> bytes:
    """Compile one ``.proto`` file to a serialized ``FileDescriptorSet``.

    The set holds the file and every file it imports (``--include_imports``),
    dependencies first, without source info. ``dependencies``: a serialized
    ``FileDescriptorSet`` of the files it may import besides the well-known
    types (schema references' files, by their import paths).

    Raises:
        ProtobufSchemaError: protoc refused the file (the first errors, each
            with its line and column; the first one's are on the exception),
            or the compile went past ``limits``.
    """
    with tempfile.TemporaryDirectory(prefix="narad-proto-") as tmp:
        src = Path(tmp, "src")
        src.mkdir()
        (src / FILE_NAME).write_text(source, encoding="utf-8")
        out = Path(tmp, "out.pb")
        deps = ""
        if dependencies:
            deps = str(Path(tmp, "deps.pb"))
            Path(deps).write_bytes(dependencies)
        argv = [
            sys.executable,
            "-I",
            "-c",
            _DRIVER,
            str(src),
            WELL_KNOWN_INCLUDE,
            str(out),
            str(limits.cpu_seconds),
            str(limits.memory_bytes),
            FILE_NAME,
            deps,
        ]
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=limits.wall_seconds,
                cwd=tmp,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ProtobufSchemaError(
                f".proto did not compile within {limits.wall_seconds:g} s"
            ) from None
        if done.returncode == 0:
            return out.read_bytes()
        raise _refusal(done.returncode, done.stderr.decode("utf-8", "replace"), tmp)


def _refusal(code: int, stderr: str, tmp: str) -> ProtobufSchemaError:
    lines = [
        line.replace(tmp + "/src/", "").replace(tmp, "")
        for line in stderr.splitlines()
        if line.strip() and "warning:" not in line.lower()
    ]
    located: list[tuple[int, int, str]] = []
    other: list[str] = []
    for line in lines:
        match = _LOCATED.match(line)
        if match:
            located.append((int(match[1]), int(match[2]), match[3]))
        elif "Traceback" not in line and not line.startswith(" "):
            other.append(line)
    if located:
        # protoc reports in order of discovery; the reader wants the first
        # in the file first.
        located.sort()
        shown = [f"line {ln}, column {col}: {msg}" for ln, col, msg in located]
        more = len(shown) - MAX_ERRORS
        detail = "; ".join(shown[:MAX_ERRORS]) + (
            f"; and {more} more" if more > 0 else ""
        )
        line, column = located[0][0], located[0][1]
        return ProtobufSchemaError(
            f".proto does not compile: {detail}", line=line, column=column
        )
    if code < 0 or any(sign in stderr for sign in _OUT_OF_MEMORY):
        return ProtobufSchemaError(
            ".proto did not compile within the compiler's time and memory limits"
        )
    detail = "; ".join(other[:MAX_ERRORS]) or f"protoc exited with status {code}"
    return ProtobufSchemaError(f".proto does not compile: {detail}")
