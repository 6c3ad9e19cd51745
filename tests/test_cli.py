from __future__ import annotations

import pytest

from rcattr.cli import main
from rcattr.demo import ANSWER, DOCUMENTS


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("explain", "heads", "compress", "demo"))


def test_explain_help_names_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    for option in (
        "--context",
        "--question",
        "--answer",
        "--chunks-by-blank-line",
        "--granularity",
        "--html",
    ):
        assert option in out


def test_compress_help_names_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["compress", "--help"])
    out = capsys.readouterr().out
    for option in ("--context", "--question", "--c", "--ratio", "--window", "--heatmap", "--model"):
        assert option in out


def test_demo_rejects_a_bad_top_k(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--top-k", "0"])
    assert "--top-k must be at least 1 or 'outliers', got '0'" in capsys.readouterr().err


def _sources(out: str) -> list[str]:
    return [line.split("[doc ")[1][0] for line in out.splitlines() if line.startswith("  1. ")]


@pytest.mark.real_model
def test_demo_finds_the_document_the_answer_quotes(capsys):
    assert main(["demo", "--max-new-tokens", "32", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Answer: ") and "330" in out
    assert _sources(out)[0] == "1"


def _on_the_demo_documents(command: str, directory) -> list[str]:
    """``command``'s arguments for the demo documents written to a file, one per paragraph."""
    context = directory / "context.txt"
    context.write_text("\n\n".join(DOCUMENTS), encoding="utf-8")
    return [command, "--context", str(context), "--chunks-by-blank-line", "--question", "How tall?"]


@pytest.mark.real_model
def test_explain_a_file_with_an_answer_and_write_html(tmp_path, capsys):
    html = tmp_path / "report.html"
    argv = _on_the_demo_documents("explain", tmp_path)
    assert main([*argv, "--answer", ANSWER, "--html", str(html), "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert _sources(out) == ["1", "2"]  # each answer sentence to its own document
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.real_model
def test_heads_writes_the_heat_map(tmp_path, capsys):
    out_file = tmp_path / "heads.png"
    assert main(["heads", "--answer", ANSWER, "--out", str(out_file), "--top-k", "5"]) == 0
    assert out_file.read_bytes().startswith(b"\x89PNG")
    assert "Top heads (superiority): L" in capsys.readouterr().out


@pytest.mark.real_model
def test_compress_answers_twice_and_draws_the_evictions(tmp_path, capsys):
    heatmap = tmp_path / "evicted.png"
    argv = _on_the_demo_documents("compress", tmp_path)
    assert main([*argv, "--max-new-tokens", "8", "--heatmap", str(heatmap)]) == 0
    out = capsys.readouterr().out
    assert "Full cache: " in out and "RCKVCache: " in out
    evicted = float(out.split("Evicted ")[1].split("%")[0])
    assert 20 < evicted < 95
    assert heatmap.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(SystemExit, match="c must be"):
        main([*argv, "--c", "-1"])
