from __future__ import annotations

import pytest

from rcattr.cli import main


def test_help_lists_the_demo(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "demo" in capsys.readouterr().out


def test_demo_rejects_a_bad_top_k():
    with pytest.raises(SystemExit, match="--top-k must be at least 1, got 0"):
        main(["demo", "--top-k", "0"])


@pytest.mark.real_model
def test_demo_finds_the_document_the_answer_quotes(capsys):
    assert main(["demo", "--max-new-tokens", "32"]) == 0
    out = capsys.readouterr().out
    assert "Answer:" in out and "330" in out
    scores = [float(line.split("%")[0].split("]")[1]) for line in out.splitlines() if line.startswith("  [")]
    assert len(scores) == 3 and abs(sum(scores) - 100) < 0.5
    assert max(scores) == scores[0]
