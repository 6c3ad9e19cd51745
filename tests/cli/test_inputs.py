"""The CLI's inputs (rcattr.cli.inputs): bad files, paths and prompts too long for the window are one line,
before any model work."""

from __future__ import annotations

from pathlib import Path

import pytest

from rcattr.cli import main
from tests.helpers import context_files


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "--context", "{long}"], "--context: the prompt (3"),
        (["explain", "--context", "{short}", "--answer", "x" * 300], "--answer: prompt ("),
        (["compress", "--context", "{long}"], "leaves no room for an answer in the model's window of 256"),
    ],
)
def test_what_exceeds_the_window_is_refused_before_the_weights_load(
    saved_llama, tmp_path, capsys, monkeypatch, argv, message
):
    import rcattr.runtime.models

    folder = saved_llama
    monkeypatch.setattr(
        rcattr.runtime.models, "load_model", lambda *a, **k: pytest.fail("loaded the model first")
    )
    (tmp_path / "long.txt").write_text("Paris is the capital of France. " * 10, encoding="utf-8")
    (tmp_path / "short.txt").write_text("Paris is in France.", encoding="utf-8")
    files = {"long": tmp_path / "long.txt", "short": tmp_path / "short.txt"}
    capsys.readouterr()  # only the command's own output below
    assert main([part.format(**files) for part in argv] + ["--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "--context", "{d}/missing.txt"], "--context: {d}/missing.txt does not exist"),
        (["explain", "--context", "{d}"], "is a directory; give a text file"),
        (["explain", "--context", "{d}/binary.dat"], "is not a text file (it contains NUL bytes)"),
        (["explain", "--context", "{d}/latin1.txt"], "is not utf-8 text (byte 0xe9 at offset 3)"),
        (["explain", "--context", "{d}/latin1.txt", "--encoding", "klingon"], "unknown text encoding"),
        (["explain", "--context", "{d}/empty.txt"], "--context: {d}/empty.txt is empty"),
        (["explain", "--context", "{d}/good.txt", "--answer", " "], "--answer: the answer is empty"),
        (["heads", "--answer", ""], "--answer: the answer is empty"),
        (["explain", "--context", "{d}/good.txt", "--html", "{d}/no/such/dir/r.html"], "the folder"),
        (["heads", "--out", "{d}/heads.bmpx"], "cannot tell an image format from '.bmpx'"),
        (["compress", "--context", "{d}/good.txt", "--heatmap", "{d}"], "is a directory; give a file name"),
        (
            ["explain", "--context", "{d}/good.txt", "--html", "{d}/r.png"],
            "cannot tell an HTML page from '.png'",
        ),
        *(
            pytest.param(
                argv,
                f"{argv[-2]}: cannot write in the folder /proc",
                marks=pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here"),
            )
            for argv in (
                ["explain", "--context", "{d}/good.txt", "--html", "/proc/x.html"],
                ["compress", "--context", "{d}/good.txt", "--heatmap", "/proc/e.png"],
                ["heads", "--out", "/proc/heads.png"],
            )
        ),
    ],
)
def test_bad_files_and_paths_are_one_line_before_any_model_work(tmp_path, capsys, monkeypatch, argv, message):
    import rcattr.runtime.models

    monkeypatch.setattr(
        rcattr.runtime.models, "load_model", lambda *a, **k: pytest.fail("loaded a model first")
    )
    directory = context_files(tmp_path)
    assert main([part.format(d=directory) for part in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rcattr {argv[0]}: error: ")
    assert message.format(d=directory) in err
