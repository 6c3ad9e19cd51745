"""The attribution benchmark's command line (rcattr.eval.attribution.cli): unknown methods refused before any write."""

from __future__ import annotations

import pytest

from rcattr.eval.attribution import (
    main,
)


def test_cli_rejects_unknown_methods(saved_llama, quotesum_data) -> None:
    with pytest.raises(SystemExit, match="unknown method"):
        main(["--dataset", "quotesum", "--out", str(quotesum_data / "x"), "--methods", "rc,magic"])
    assert not (quotesum_data / "x").exists()  # refused before anything is written


def test_cli_runs_the_methods_it_is_given(saved_llama, quotesum_data) -> None:
    from rcattr.baselines import BM25Attributor
    from rcattr.eval.attribution.method import SpanAttributorMethod
    from rcattr.eval.attribution.methods import RUN_FILES
    from rcattr.eval.common.registry import MethodRegistry

    built = []

    def builder(model, tokenizer, config):
        built.append(config.dataset)
        return BM25Attributor(model, tokenizer)

    methods = MethodRegistry([SpanAttributorMethod("bm25", builder)], reserved=RUN_FILES)
    out = quotesum_data / "run"
    arguments = ["--dataset", "quotesum", "--model", str(saved_llama), "--out", str(out), "--limit", "1"]
    assert main([*arguments, "--methods", "bm25"], methods) == 0
    assert built == ["quotesum"]  # the given registry's builder, not the built-in BM25's
    assert (out / "records" / "bm25.jsonl").exists()
    with pytest.raises(ValueError, match="unknown method"):  # only the given methods run
        main([*arguments, "--methods", "random"], methods)
