"""The package's shape (issue 36): no import cycle among rcattr's modules, no module over 400 lines, and
public constructors with few parameters."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import rcattr
from rcattr import RCAttributor
from rcattr.kvcache import RCKVCache

PACKAGE = Path(rcattr.__file__).parent
MAX_LINES = 400
MAX_PARAMETERS = 6  # counting model and tokenizer


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """The rcattr modules ``name`` imports anywhere (functions included), but for typing-only imports."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            # a package's own ancestors are imported with it anyway (rcattr's lazy names go through them)
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def test_no_import_cycle() -> None:
    graph = {name: _imports(name) for name in MODULES}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycle = path[path.index(name) :] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in graph:
        visit(name, [])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_small(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by concept (at most {MAX_LINES})"


@pytest.mark.parametrize("cls", [RCAttributor, RCKVCache])
def test_public_constructor_is_thin(cls: type) -> None:
    parameters = list(inspect.signature(cls.__init__).parameters)[1:]  # without self
    assert len(parameters) <= MAX_PARAMETERS, f"{cls.__name__}({', '.join(parameters)})"
