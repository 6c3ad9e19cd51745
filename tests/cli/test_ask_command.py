"""``rcattr compress --save`` then ``rcattr ask`` (rcattr.cli.ask_command): a context compressed in one process
and asked in another, and what does not fit refused in one line."""

from __future__ import annotations

import pytest

from rcattr.cli import main
from rcattr.kvcache import CompressedContext, compress_context
from tests.helpers import char_tokenizer, save_tiny, tiny_model

CONTEXT = "Paris is the capital of France. Berlin is the capital of Germany. " * 2


def _saved_context(saved_llama, tmp_path, capsys, *options: str):
    document = tmp_path / "context.txt"
    document.write_text(CONTEXT, encoding="utf-8")
    folder = tmp_path / "saved.rcctx"
    argv = ["compress", "--context", str(document), "--model", str(saved_llama), "--save", str(folder)]
    assert main([*argv, "--window", "4", *options]) == 0
    return folder, capsys.readouterr().out


def test_compress_saves_the_context_alone_and_ask_answers_from_it(saved_llama, tmp_path, capsys) -> None:
    folder, out = _saved_context(saved_llama, tmp_path, capsys, "--ratio", "0.5")
    assert "Full cache:" not in out  # no question: compressed and saved only
    assert f"Saved to {folder}" in out and "50.0% of its KV entries evicted" in out
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    expected = compress_context(model, tokenizer, CONTEXT, ratio=0.5, window=4)
    assert CompressedContext.load(folder, model, tokenizer).nbytes() == expected.nbytes()
    argv = ["ask", str(folder), "--model", str(saved_llama), "--max-new-tokens", "6"]
    assert main([*argv, "--question", "Where?", "--question", "Who?"]) == 0
    out = capsys.readouterr().out
    for question in ("Where?", "Who?"):
        answer = expected.generate(question, max_new_tokens=6).strip()
        assert f"Q: {question}\nA: {answer}\n" in out
    assert out.startswith("Context: ")


def test_compress_with_a_question_compares_and_saves(saved_llama, tmp_path, capsys) -> None:
    document = tmp_path / "context.txt"
    document.write_text(CONTEXT, encoding="utf-8")
    argv = ["compress", "--context", str(document), "--question", "Where?", "--model", str(saved_llama)]
    assert main([*argv, "--max-new-tokens", "4", "--save", str(tmp_path / "saved")]) == 0
    out = capsys.readouterr().out
    assert "RCKVCache: " in out and "Saved to " in out


def test_ask_refuses_a_missing_folder_and_another_model(saved_llama, tmp_path, capsys) -> None:
    assert main(["ask", str(tmp_path / "none"), "--question", "Where?", "--model", str(saved_llama)]) == 2
    assert "no such folder" in capsys.readouterr().err
    folder, _ = _saved_context(saved_llama, tmp_path, capsys)
    other = save_tiny(tiny_model("qwen3"), tmp_path / "qwen3")
    capsys.readouterr()
    assert main(["ask", str(folder), "--question", "Where?", "--model", str(other)]) == 1
    err = capsys.readouterr().err
    assert "saved with another model" in err and len(err.strip().splitlines()) == 1


def test_ask_needs_a_question(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["ask", "folder"])
    assert "--question" in capsys.readouterr().err
