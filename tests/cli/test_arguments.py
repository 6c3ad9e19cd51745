"""The CLI's parser (rcattr.cli.arguments): help naming every option, bad option values as usage errors."""

from __future__ import annotations

import pytest

from rcattr.cli import main


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("explain", "heads", "compress", "serve", "demo"))


def test_serve_help_names_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    for option in (
        "--host",
        "--port",
        "--threads",
        "--queue-size",
        "--max-batch-size",
        "--max-wait-ms",
        "--model",
    ):
        assert option in out


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
    for option in (
        "--context",
        "--question",
        "--c",
        "--ratio",
        "--budget",
        "--decode-every",
        "--window",
        "--heatmap",
        "--model",
    ):
        assert option in out


def test_demo_rejects_a_bad_top_k(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--top-k", "0"])
    assert "--top-k must be at least 1 or 'outliers', got '0'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--top", "0"], "argument --top: must be a whole number >= 1, got '0'"),
        (["demo", "--top", "-1"], "argument --top: must be a whole number >= 1, got '-1'"),
        (["demo", "--max-new-tokens", "0"], "argument --max-new-tokens: must be a whole number >= 1"),
        (["compress", "--context", "x", "--c", "1", "--ratio", "0.5"], "not allowed with argument --c"),
        (["compress", "--context", "x", "--c", "-1"], "argument --c: must be a finite number >= 0"),
        (["compress", "--context", "x", "--ratio", "1"], "argument --ratio: must be a share in [0, 1)"),
        (["compress", "--context", "x", "--window", "0"], "argument --window: must be a whole number >= 1"),
        (["compress", "--context", "x", "--budget", "0"], "argument --budget: must be a whole number >= 1"),
        (["compress", "--context", "x", "--budget", "2.5"], "argument --budget: must be a whole number >= 1"),
        (
            ["compress", "--context", "x", "--decode-every", "0"],
            "argument --decode-every: must be a whole number",
        ),
        (
            ["compress", "--context", "x", "--c", "1", "--budget", "64"],
            "--budget: not allowed with argument --c",
        ),
        (
            ["compress", "--context", "x", "--budget", "64", "--ratio", "0.5"],
            "not allowed with argument --budget",
        ),
    ],
)
def test_bad_option_values_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_import_and_help_do_not_import_torch():
    import subprocess
    import sys

    check = (
        "import sys, rcattr, rcattr.cli\n"
        "heavy = [m for m in ('torch', 'transformers', 'nltk', 'captum', 'matplotlib', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from rcattr import RCAttributor\n"
        "heavy = [m for m in ('nltk', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", check], check=True)
    help_text = subprocess.run(
        [sys.executable, "-m", "rcattr", "compress", "--help"], check=True, capture_output=True, text=True
    )
    assert "--c C | --ratio RATIO" in help_text.stdout
