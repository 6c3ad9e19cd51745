"""Every tutorial runs end to end on the default model, as a user runs it, and writes its outputs."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # each tutorial runs the default model end to end in a fresh process

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
PNG = b"\x89PNG"


def run_tutorial(name: str, tmp_path: Path) -> tuple[Path, str]:
    """Run ``tutorials/NAME.py`` in a fresh process from ``tmp_path``; its output folder and printout."""
    environment = {**os.environ, "RCATTR_TUTORIAL_OUT": str(tmp_path), "MPLBACKEND": "Agg"}
    finished = subprocess.run(
        [sys.executable, str(TUTORIALS / f"{name}.py")],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    return tmp_path / name, finished.stdout


def test_every_tutorial_is_tested_and_in_percent_format() -> None:
    names = sorted(path.stem for path in TUTORIALS.glob("*.py"))
    tested = sorted(name.removeprefix("test_") for name in globals() if name.startswith("test_0"))
    assert names == tested
    for name in names:
        text = (TUTORIALS / f"{name}.py").read_text()
        assert "format_name: percent" in text and text.count("# %% [markdown]") >= 5


@pytest.mark.real_model
def test_01_explain_a_rag_answer(tmp_path: Path) -> None:
    out, printed = run_tutorial("01_explain_a_rag_answer", tmp_path)
    assert "Lake Baikal" in (out / "explanation.html").read_text()
    for plot in ("heads.png", "sources.png", "support.png"):
        assert (out / plot).read_bytes().startswith(PNG)
    comparison = pd.read_csv(out / "comparison.csv")
    assert len(comparison) == 2  # one row per sentence of the given answer
    assert (comparison["rc top doc"] == comparison["right doc"]).all()
    assert "Mean share on the right document" in printed
    # the given answer copies its numbers and names from the documents: none of them is flagged
    flagged = re.search(r"Given answer: \d+ of \d+ tokens unsupported: (\[.*\])", printed)
    assert flagged is not None
    assert not [t for t in ast.literal_eval(flagged.group(1)) if any(c.isdigit() or c.isupper() for c in t)]
    # the same answer with a number the documents do not hold: a digit of it is flagged
    edited = re.search(r"1,642 changed to 2,917: \d+ tokens unsupported: (\[.*\])", printed)
    assert edited is not None
    assert [t for t in ast.literal_eval(edited.group(1)) if t.isdigit()]


@pytest.mark.real_model
def test_02_benchmark_attribution(tmp_path: Path) -> None:
    out, printed = run_tutorial("02_benchmark_attribution", tmp_path)
    results = json.loads((out / "run" / "results.json").read_text())
    methods = results["methods"]
    assert {"rc", "bm25", "random", "word_overlap", "paper · all heads"} <= set(methods)
    assert all(methods[name]["n_records"] == 6 for name in ("rc", "word_overlap"))
    assert methods["rc"]["accuracy"] > methods["random"]["accuracy"]
    assert "| word_overlap |" in (out / "run" / "results.md").read_text()
    assert (out / "run" / "sweep.png").read_bytes().startswith(PNG)
    assert "quotesum/word_overlap" not in printed  # progress bars go to stderr, tables to stdout


@pytest.mark.real_model
@pytest.mark.transformers_line  # the 5.2 leg's tutorial: RCKVCache in generate() and RCPress beside kvpress's presses
def test_03_kv_cache_in_generate(tmp_path: Path) -> None:
    out, printed = run_tutorial("03_kv_cache_in_generate", tmp_path)
    for plot in ("compression_per_head.png", "choosing_c.png"):
        assert (out / plot).read_bytes().startswith(PNG)
    sweep = pd.read_csv(out / "choosing_c.csv")
    assert len(sweep) >= 3
    press = out / "press_comparison.csv"
    assert press.exists() == (importlib.util.find_spec("kvpress") is not None)


@pytest.mark.real_model
def test_04_cite_sources_in_a_rag_app(tmp_path: Path) -> None:
    out, printed = run_tutorial("04_cite_sources_in_a_rag_app", tmp_path)
    markdown = (out / "cited_answer.md").read_text()
    assert "[^1]" in markdown or "[^2]" in markdown
    assert re.search(r"^\[\^\d\]: \[(Lake Baikal|Caspian Sea)\]\(https://en\.wikipedia\.org/", markdown, re.M)
    assert '<li id="rc-source-' in (out / "cited_answer.html").read_text()
    citations = pd.read_csv(out / "citations.csv")
    assert citations["id"].dropna().isin(["wiki-baikal", "node-17"]).all()
    assert citations["status"].isin(["supported", "partial", "weak", "unsupported"]).all()
    # the given answer: its first sentence cites Lake Baikal's document, its second the Caspian Sea's
    given = re.search(
        r"Lake Baikal is the deepest lake, at 1,642 metres \[(.*?)\]\. The Caspian Sea is the "
        r"largest by area \[(.*?)\]\.",
        printed,
    )
    assert given is not None and given.group(1).startswith("1") and given.group(2).startswith("2")
    batch = pd.read_csv(out / "batch.csv")
    assert len(batch) == 3 and batch["answer"].str.len().gt(0).all()


@pytest.mark.real_model
def test_the_guide_s_rag_citation_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    guide = (TUTORIALS.parent / "docs" / "guide" / "cite.md").read_text()
    code = re.search(r"# Cite sources in your RAG app\n\n```python\n(.*?)```", guide, re.S)
    assert code is not None and len(code.group(1).strip().splitlines()) <= 10 + 1  # one blank line
    exec(compile(code.group(1), "guide: RAG citations", "exec"), {})
    printed = capsys.readouterr().out
    assert "[^1]: Eiffel Tower" in printed and "[^1]" in printed.split("\n\n")[0]


@pytest.mark.real_model
def test_readme_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (TUTORIALS.parent / "README.md").read_text()
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", readme, re.S)
    assert code is not None and len(code.group(1).strip().splitlines()) <= 10 + 1  # one blank line
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README quick start", "exec"), {})
    assert "Eiffel" in (tmp_path / "report.html").read_text()


@pytest.mark.real_model
def test_05_citation_service(tmp_path: Path) -> None:
    out, printed = run_tutorial("05_citation_service", tmp_path)
    citations = pd.read_csv(out / "citations.csv")
    assert len(citations) == 4  # one row per answer sentence
    deepest = citations[citations["question"] == "Which lake is the deepest?"].iloc[0]
    assert deepest["cited"] == "Lake Baikal" and deepest["status"] == "supported"
    invented = citations[citations["sentence"].str.contains("512,000")].iloc[0]
    assert invented["not in the documents"] == "512,000" and invented["status"] == "unsupported"
    assert "refused: 422: documents[0]: the document is empty" in printed
    assert "'served': 3" in printed
