"""CI's second leg (``make test-kvpress``, transformers' 5.2 line with kvpress) runs what differs there (issue 70):
every kvpress test, the tests of every module that knows transformers' versions or internals, and a short
real-model smoke test. The selection is the Makefile's ``TRANSFORMERS_LINE_TESTS`` marker expression, collected
here as that leg collects it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.layout import PACKAGE, TESTS, mirrored_test

ROOT = TESTS.parent
# all of runtime/ (the attention layer, capture, generation, model loading) and kvcache/ (a transformers Cache)
VERSIONED_FOLDERS = ("runtime", "kvcache")


def _expression() -> str:
    found = re.search(r"^TRANSFORMERS_LINE_TESTS\s*[:?]?=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert found is not None, "the Makefile defines no TRANSFORMERS_LINE_TESTS"
    return found.group(1).strip()


def _knows_transformers_versions(module: Path) -> bool:
    """Whether ``module`` imports rcattr's version seam (``rcattr.runtime.compat``) or a transformers submodule
    (``transformers.cache_utils``, ``.masking_utils``, ...: the internals that move between releases)."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [
                f"{node.module}.{alias.name}" for alias in node.names if node.module == "rcattr.runtime"
            ]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name == "rcattr.runtime.compat" or name.startswith("transformers.") for name in names):
            return True
    return False


def _versioned_modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and (path.relative_to(PACKAGE).parts[0] in VERSIONED_FOLDERS or _knows_transformers_versions(path))
    ]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every test of the suite: whether the 5.2 leg's expression selects it, and its markers."""
    out = tmp_path_factory.mktemp("selection") / "selection.json"
    environment = {**os.environ, "RCATTR_SELECTION_OUT": str(out)}
    # kvpress's tests are collected (and skipped) where it is missing
    environment.pop("RCATTR_REQUIRE_KVPRESS", None)
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "tests.helpers.selection", "-m", _expression(), "tests"]
    finished = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _selected(collected: dict[str, dict], prefix: str) -> list[bool]:
    return [entry["selected"] for node, entry in collected.items() if node.startswith(prefix)]


def test_the_versioned_modules_are_found() -> None:
    found = {path.relative_to(PACKAGE).as_posix() for path in _versioned_modules()}
    assert {"runtime/compat.py", "runtime/capture.py", "kvcache/cache.py", "kvcache/press.py"} <= found
    # outside the two folders, by their imports
    assert {"attribution/reduction.py", "eval/kv/methods.py", "eval/kv_long/methods.py"} <= found
    assert "attribution/spans.py" not in found


@pytest.mark.parametrize(
    "module", _versioned_modules(), ids=lambda path: path.relative_to(PACKAGE).as_posix()
)
def test_every_module_that_knows_transformers_versions_has_its_tests_in_the_5_2_leg(
    module: Path, collected: dict[str, dict]
) -> None:
    mirrored = mirrored_test(module).relative_to(ROOT).as_posix()
    selected = _selected(collected, mirrored + "::")
    assert selected, f"{mirrored} has no tests"
    assert all(selected), (
        f"{mirrored} is not marked transformers_line (the 5.2 leg leaves out some of its tests)"
    )


def test_the_5_2_leg_runs_every_kvpress_test(collected: dict[str, dict]) -> None:
    kvpress = {node: entry["selected"] for node, entry in collected.items() if "kvpress" in entry["markers"]}
    assert kvpress and all(kvpress.values()), [node for node, selected in kvpress.items() if not selected]


def test_the_5_2_leg_runs_a_real_model_smoke_test(collected: dict[str, dict]) -> None:
    def real_and_selected(prefix: str) -> bool:
        return any(
            entry["selected"] and "real_model" in entry["markers"]
            for node, entry in collected.items()
            if node.startswith(prefix)
        )

    assert real_and_selected("tests/test_real_attributor.py::"), "no attribution on the default model"
    assert real_and_selected("tests/kvcache/test_real_cache.py::"), "no generation with RCKVCache on it"
    tutorial = collected["tests/test_tutorials.py::test_03_kv_cache_in_generate"]  # RCPress beside kvpress
    assert tutorial["selected"], "not tutorial 3"


def test_the_5_2_leg_is_a_selection_not_the_suite_again(collected: dict[str, dict]) -> None:
    selected = sum(entry["selected"] for entry in collected.values())
    assert selected < len(collected) / 2, f"{selected} of {len(collected)} tests"
    assert not any(_selected(collected, "tests/test_tutorials.py::test_01"))
