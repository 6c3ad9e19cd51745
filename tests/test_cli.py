from __future__ import annotations

from pathlib import Path

import pytest

from rcattr.cli import main
from rcattr.demo import ANSWER, DOCUMENTS
from rcattr.kvcache import DecodeEviction, Ratio, Threshold, TokenBudget


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


def _sources(out: str) -> list[str]:
    return [line.split("[doc ")[1][0] for line in out.splitlines() if line.startswith("  1. ")]


@pytest.mark.real_model
def test_demo_finds_the_document_the_answer_quotes(capsys):
    assert main(["demo", "--max-new-tokens", "32", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Answer: ") and "330" in out
    assert _sources(out)[0] == "1"


@pytest.mark.real_model
def test_demo_does_not_cite_a_number_its_documents_do_not_hold(capsys, tmp_path):
    """The default model's own answer gives Mount Fuji a height no document holds (2,781.25 m, not 3,776 m):
    its sentence is marked unsupported and cites nothing, in the report and on the HTML page."""
    page = tmp_path / "demo.html"
    assert main(["demo", "--color", "never", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    answer = out.splitlines()[0]
    assert "2,781.25" in answer and "3,776" not in answer  # the model's error, as the README shows it
    assert answer.endswith("[unsupported: 2,781.25].") and "[1]" not in answer and "[2]" not in answer
    assert "unsupported (0.00)" in out and "not in the prompt: '2,781.25'" in out
    html = page.read_text()
    assert '<mark class="rc-unheld"' in html and ">2,781.25</mark>" in html and "rc-source-" not in html


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
def test_heads_with_lexical_says_how_much_bm25_filled(tmp_path, capsys):
    assert main(["heads", "--answer", ANSWER, "--out", str(tmp_path / "heads.png"), "--lexical"]) == 0
    out = capsys.readouterr().out
    assert "of the votes, where the heads disagreed" in out and "BM25 filled" in out


@pytest.mark.real_model
def test_heads_writes_the_heat_map(tmp_path, capsys):
    out_file = tmp_path / "heads.png"
    assert main(["heads", "--answer", ANSWER, "--out", str(out_file), "--top-k", "5"]) == 0
    assert out_file.read_bytes().startswith(b"\x89PNG")
    assert "Top heads (superiority): L" in capsys.readouterr().out
    jpeg = tmp_path / "heads.jpg"
    assert main(["heads", "--answer", ANSWER, "--out", str(jpeg), "--top-k", "300"]) == 0
    assert jpeg.read_bytes().startswith(b"\xff\xd8")  # JPEG data under a .jpg name
    err = capsys.readouterr().err
    assert err == "rcattr heads: warning: top_k=300 but the model has 270 heads; using all of them\n"


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
    assert "The two answers are identical" in out or "The answers diverge at token " in out


@pytest.mark.parametrize(
    ("options", "rule", "decode"),
    [
        (["--budget", "12", "--decode-every", "4"], TokenBudget(12), DecodeEviction(4)),
        (["--budget", "12"], TokenBudget(12), None),
        (
            ["--c", "0.5", "--decode-every", "3"],
            Threshold(0.5),
            DecodeEviction(3, Threshold(0.5, scope="layer")),
        ),
        (["--ratio", "0.5", "--decode-every", "5"], Ratio(0.5), DecodeEviction(5)),
    ],
)
def test_compress_budget_and_decode_every_build_the_cache(
    tmp_path, capsys, monkeypatch, options, rule, decode
):
    """On a tiny model saved with its tokenizer: the cache compress answers with has the policy asked for."""
    import rcattr.kvcache.compare
    from tests.helpers import save_tiny, tiny_model

    compare, policies = rcattr.kvcache.compare.compare_generations, []

    def recording(model, tokenizer, inp, cache, max_new_tokens):
        policies.append(cache.policy)
        return compare(model, tokenizer, inp, cache, max_new_tokens)

    monkeypatch.setattr(rcattr.kvcache.compare, "compare_generations", recording)
    folder = save_tiny(tiny_model("llama"), tmp_path / "tiny")
    context = tmp_path / "context.txt"
    context.write_text("Paris is the capital of France. Berlin is the capital of Germany.", encoding="utf-8")
    argv = ["compress", "--context", str(context), "--question", "Where?", "--model", str(folder)]
    assert main([*argv, "--window", "4", "--max-new-tokens", "12", *options]) == 0
    assert "RCKVCache: " in capsys.readouterr().out
    (policy,) = policies
    assert (policy.rule, policy.decode) == (rule, decode)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "--context", "{long}"], "--context: the prompt (3"),
        (["explain", "--context", "{short}", "--answer", "x" * 300], "--answer: prompt ("),
        (["compress", "--context", "{long}"], "leaves no room for an answer in the model's window of 256"),
    ],
)
def test_what_exceeds_the_window_is_refused_before_the_weights_load(
    tmp_path, capsys, monkeypatch, argv, message
):
    import rcattr.models
    from tests.helpers import save_tiny, tiny_model

    folder = save_tiny(tiny_model("llama"), tmp_path / "tiny")
    monkeypatch.setattr(rcattr.models, "load_model", lambda *a, **k: pytest.fail("loaded the model first"))
    (tmp_path / "long.txt").write_text("Paris is the capital of France. " * 10, encoding="utf-8")
    (tmp_path / "short.txt").write_text("Paris is in France.", encoding="utf-8")
    files = {"long": tmp_path / "long.txt", "short": tmp_path / "short.txt"}
    capsys.readouterr()  # saving the tiny model's progress bar
    assert main([part.format(**files) for part in argv] + ["--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_compress_lowers_max_new_tokens_to_the_window_as_explain_does(tmp_path, capsys) -> None:
    from tests.helpers import save_tiny, tiny_model

    folder = save_tiny(tiny_model("llama"), tmp_path / "tiny")
    context = tmp_path / "context.txt"
    context.write_text("Paris is the capital of France.", encoding="utf-8")
    argv = ["compress", "--context", str(context), "--model", str(folder), "--max-new-tokens", "100000"]
    capsys.readouterr()  # saving the tiny model's progress bar
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "rcattr compress: warning: max_new_tokens=100000 lowered to " in captured.err
    assert "RCKVCache: " in captured.out


# ---------------------------------------------------------------------------------------------
# bad input: one line naming the problem, a non-zero exit, before any model work
# ---------------------------------------------------------------------------------------------


def _context_files(directory):
    (directory / "latin1.txt").write_bytes("café au lait".encode("latin-1"))
    (directory / "binary.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (directory / "empty.txt").write_text("  \n\n", encoding="utf-8")
    (directory / "good.txt").write_text("Paris is the capital of France.", encoding="utf-8")
    return directory


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
    import rcattr.models

    monkeypatch.setattr(rcattr.models, "load_model", lambda *a, **k: pytest.fail("loaded a model first"))
    directory = _context_files(tmp_path)
    assert main([part.format(d=directory) for part in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rcattr {argv[0]}: error: ")
    assert message.format(d=directory) in err


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


def test_a_model_that_cannot_be_loaded_is_one_line(tmp_path, capsys, monkeypatch):
    import socket

    def unreachable(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    context = _context_files(tmp_path) / "good.txt"
    assert main(["explain", "--context", str(context), "--model", "rcattr-test/no-such-model"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "cannot load model 'rcattr-test/no-such-model'" in err and "cannot be reached" in err


def test_rcattr_traceback_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("RCATTR_TRACEBACK", "1")
    with pytest.raises(Exception, match="does not exist"):
        main(["explain", "--context", str(tmp_path / "missing.txt")])


@pytest.mark.parametrize(
    ("reference", "other", "first", "agreement"),
    [
        ([1, 2, 3], [1, 2, 3], None, 1.0),
        ([1, 2, 3, 4], [1, 2, 9, 4], 2, 0.75),
        ([1, 2, 3, 4], [1, 2], 2, 0.5),
        ([5, 6], [7, 6, 8, 9], 0, 0.25),
    ],
)
def test_answer_agreement(reference, other, first, agreement):
    from rcattr.kvcache.compare import AnswerAgreement

    found = AnswerAgreement.of(reference, other)
    assert found.first_difference == first
    assert found.agreement == pytest.approx(agreement)
    assert found.length == max(len(reference), len(other))


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
