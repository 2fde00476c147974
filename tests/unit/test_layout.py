"""The layout's import rules, read from the code (docs/layout.md).

The import graph of ``narad`` and of the built-in plugins under ``plugins/``
is built from each module's syntax tree, imports inside functions and
``if TYPE_CHECKING:`` blocks aside from the latter included: an import put
inside a function to dodge a cycle still runs, so it still counts. The graph
must have no cycle, and no ``narad.*`` module may import a plugin package
(``narad_*``): the core reaches plugins only through pluggy's hooks and the
``narad`` entry-point group, like a third party's. The other way round, a
plugin imports only the core's public modules: nothing under
``narad.schema``, the engine's internals (what plugins need is public in
``narad.drafts``, ``narad.formats``, ``narad.compatibility``,
``narad.jsontext``, ``narad.jsonschema`` and ``narad.schematypes``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"


def module_files() -> dict[str, Path]:
    """Every module of ``narad`` and of the plugin packages, by dotted name."""
    found: dict[str, Path] = {}
    packages = [ROOT / "narad"]
    packages += [p for p in sorted(PLUGINS.iterdir()) if (p / "__init__.py").is_file()]
    for package in packages:
        base = package.parent
        for path in sorted(package.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at any depth (functions, methods,
    ``try`` blocks), except under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imported_names(name: str, path: Path) -> set[str]:
    """The dotted names ``name``'s module imports (``from a import b`` gives
    both ``a`` and ``a.b``: ``b`` may be a submodule)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package.split(".")
            if node.level > 1:
                base = base[: -(node.level - 1)]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        names.add(module)
        names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (importing ``a.b.c`` runs
    the packages ``a`` and ``a.b`` first, but those edges are the import
    system's, not the module's: only the module named counts)."""
    files = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for imported in imported_names(name, path):
            if imported in files and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module
    (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_is_read_from_the_code() -> None:
    graph = import_graph()
    # Some edges every layout keeps: the app factory reads the config, and a
    # plugin imports the hook marker from the core.
    assert "narad.config" in graph["narad.app"]
    assert "narad" in graph["narad_formats"]
    # An import inside a function counts.
    source = "def f():\n    from narad import config\n"
    tree = ast.parse(source)
    assert [type(n) for n in _runtime_imports(tree)] == [ast.ImportFrom]


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_core_does_not_import_plugin_packages() -> None:
    graph = import_graph()
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module == "narad" or module.startswith("narad.")
        for target in targets
        if target.split(".")[0].startswith("narad_")
    )
    assert offenders == []


def plugin_files() -> dict[str, Path]:
    """Every Python file under ``plugins/`` (the built-in plugin packages, the
    example distribution and its tests), by path relative to ``plugins/``;
    build output aside."""
    skipped = {"build", ".venv", "__pycache__"}
    return {
        str(path.relative_to(PLUGINS)): path
        for path in sorted(PLUGINS.rglob("*.py"))
        if not skipped & set(path.relative_to(PLUGINS).parts)
    }


def _internal(name: str) -> bool:
    return name == "narad.schema" or name.startswith("narad.schema.")


def schema_imports(tree: ast.AST) -> list[str]:
    """The ``narad.schema`` modules a syntax tree imports, at any depth (under
    ``if TYPE_CHECKING:`` too: a type a plugin names is part of what it
    relies on), ``from narad import schema`` included."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _internal(alias.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if _internal(module):
                found.append(module)
            elif module == "narad":
                names = (f"narad.{alias.name}" for alias in node.names)
                found += [name for name in names if _internal(name)]
    return found


def test_the_schema_import_check_sees_every_form() -> None:
    sources = {
        "import narad.schema.modes\n": ["narad.schema.modes"],
        "from narad.schema.patterns import regex_search\n": ["narad.schema.patterns"],
        "from narad.schema import modes\n": ["narad.schema"],
        "from narad import hookimpl, schema\n": ["narad.schema"],
        "if TYPE_CHECKING:\n    from narad.schema.drafts import Draft\n": [
            "narad.schema.drafts"
        ],
        "def f():\n    import narad.schema\n": ["narad.schema"],
        "from narad import schematypes\nfrom narad.drafts import Draft\n": [],
        "from narad.schematypes import Mode\nfrom . import schema\n": [],
    }
    for source, expected in sources.items():
        assert schema_imports(ast.parse(source)) == expected, source


def test_plugins_do_not_import_the_schema_engine() -> None:
    files = plugin_files()
    # The walk reaches the built-in plugins and the example distribution.
    assert "narad_jsonschema/__init__.py" in files
    assert "narad-example/narad_example/__init__.py" in files
    offenders = sorted(
        f"plugins/{name} imports {module}"
        for name, path in files.items()
        for module in schema_imports(ast.parse(path.read_text(), str(path)))
    )
    assert offenders == [], (
        "plugins import narad.schema internals; use the public modules "
        "(docs/plugins.md): " + "; ".join(offenders)
    )
