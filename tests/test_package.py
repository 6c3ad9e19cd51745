"""The package's shape: no import cycle among rcattr's modules or among its folders (counting every import
statement, typing-only and in-function ones too), no module over 400 lines, no
folder over 15 modules (but the benchmarks'), and public constructors with few parameters; and the test suite's: a test file mirroring every module, and no test
module importing another (shared code lives in tests/helpers, tests/reference and conftest.py files)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import pytest

from rcattr import RCAttributor
from rcattr.kvcache import RCKVCache
from tests.helpers.layout import PACKAGE, TESTS, mirrored_test

MAX_LINES = 400
MAX_FOLDER_MODULES = 15  # a folder with more is a flat list of parts: group them by concept
# counting model and tokenizer; 7 since RCKVCache took ratio= (issue 71) beside c and budget, the three exclusive
# sizes of rcattr compress (--c, --ratio, --budget), with window, decode_every and policy
MAX_PARAMETERS = 7


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """The rcattr modules ``name`` imports anywhere: at the top, in functions and for typing only."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            # ``from package import module`` imports the module; ``from module import name`` the module
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            # a package's own ancestors are imported with it anyway (rcattr's lazy names go through them)
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` (node -> the nodes it imports), as the path that closes it; None if there is none."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return None
        for target in sorted(graph.get(name, ())):
            cycle = visit(target, [*path, name])
            if cycle:
                return cycle
        done.add(name)
        return None

    return next((cycle for name in sorted(graph) if (cycle := visit(name, []))), None)


def test_no_import_cycle() -> None:
    cycle = _first_cycle({name: _imports(name) for name in MODULES})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _folder(name: str) -> str:
    """A module's folder: the package it lies in (each of rcattr's own top-level modules is one of its own)."""
    if MODULES[name].name == "__init__.py":
        return name
    package = name.rpartition(".")[0]
    return name if package == PACKAGE.name else package


def folder_imports() -> dict[str, set[str]]:
    """Folder -> the folders its modules import (every import statement). A package's `__init__.py` that
    re-exports its own subfolders does not count: it is the folder's face, not a part that uses them."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        source = _folder(name)
        for target in _imports(name):
            folder = _folder(target)
            if folder != source and not (path.name == "__init__.py" and folder.startswith(source + ".")):
                graph.setdefault(source, set()).add(folder)
    return graph


def test_folders_import_in_one_direction() -> None:
    """No folder imports one that imports it back: the record (`rcattr.record`) lies below grounding and the
    views, the result that has them as methods above them."""
    cycle = _first_cycle(folder_imports())
    assert cycle is None, "folder import cycle: " + " -> ".join(cycle or [])


def test_no_class_name_is_defined_twice() -> None:
    """One class per name in rcattr (private ones included): two classes of one name meet in one signature."""
    defined: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(name)
    assert not {name: modules for name, modules in defined.items() if len(modules) > 1}


def test_the_folder_check_finds_a_cycle() -> None:
    assert _first_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _first_cycle({"a": {"b"}, "b": set()}) is None
    assert {"rcattr.record"} <= folder_imports()["rcattr.grounding"]  # grounding reads the record


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_small(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by concept (at most {MAX_LINES})"


FOLDERS = sorted({path.parent for path in MODULES.values()})


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(PACKAGE.parent)) for f in FOLDERS])
def test_a_folder_shows_its_parts(folder: Path) -> None:
    """Outside the benchmarks (rcattr/eval), a folder holds at most 15 modules, ``__init__.py`` included."""
    if "eval" in folder.relative_to(PACKAGE).parts:
        return
    modules = sorted(path.name for path in folder.glob("*.py"))
    assert len(modules) <= MAX_FOLDER_MODULES, (
        f"{folder.name}/ holds {len(modules)} modules: {', '.join(modules)}"
    )


@pytest.mark.parametrize("cls", [RCAttributor, RCKVCache])
def test_public_constructor_is_thin(cls: type) -> None:
    parameters = list(inspect.signature(cls.__init__).parameters)[1:]  # without self
    assert len(parameters) <= MAX_PARAMETERS, f"{cls.__name__}({', '.join(parameters)})"


@pytest.mark.parametrize(
    "module",
    [name for name, path in MODULES.items() if path.name not in ("__init__.py", "__main__.py")],
)
def test_every_module_has_its_mirrored_test_file(module: str) -> None:
    expected = mirrored_test(MODULES[module])
    assert expected.is_file(), f"{module} has no {expected.relative_to(TESTS.parent)}"
    package = expected.parent
    while package != TESTS.parent:  # the suite imports its tests as packages
        assert (package / "__init__.py").is_file(), f"{package.relative_to(TESTS.parent)} has no __init__.py"
        package = package.parent


def _imported_modules(path: Path) -> set[str]:
    """The modules ``path`` imports anywhere (a subprocess's source in a string included), absolute names."""
    text = path.read_text()
    package = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts[:-1])
    found = set()
    trees = [ast.parse(text)]
    trees += [  # code run in a fresh interpreter: strings that parse and import something
        tree
        for node in ast.walk(trees[0])
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value
        for tree in [_parsed(node.value)]
        if tree is not None
    ]
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = (
                    importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    if node.level
                    else node.module or ""
                )
                found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return found


def _parsed(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def test_no_test_module_imports_a_test_module() -> None:
    """Shared code lives in tests/helpers, tests/reference and conftest.py files, never in a test module."""
    test_modules = {
        ".".join(path.relative_to(TESTS.parent).with_suffix("").parts) for path in TESTS.rglob("test_*.py")
    }
    offenders = {
        f"{path.relative_to(TESTS.parent)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in _imported_modules(path)
        if name in test_modules
    }
    assert not offenders, sorted(offenders)
