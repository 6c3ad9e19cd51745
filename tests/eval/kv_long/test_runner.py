"""The long-generation benchmark: its tasks, its token-by-token protocol, its methods and the runner end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rcattr.eval.kv.protocol import split_prompt
from rcattr.eval.kv_long.cli import main
from rcattr.eval.kv_long.data import PREFIX_CLOSING, load_needle_prefixed, load_qmsum_general
from rcattr.eval.kv_long.methods import (
    DecodingPressMethod,
    FullDecoding,
    RCDecoding,
    TokenBudget,
    long_methods,
    prefill_ratio,
)
from rcattr.eval.kv_long.report import summarise_long, table_long
from rcattr.eval.kv_long.runner import LongBenchmarkConfig, decode, divergence
from rcattr.kvcache import RCKVCache
from tests.helpers import PARAGRAPHS, SQUAD, char_tokenizer, data_folder, save_tiny, wide_llama


def _words(text: str) -> int:
    return len(text.split())


def test_qmsum_general_queries_follow_the_meetings_opening() -> None:
    records = load_qmsum_general(_words, budget=300)
    assert len(records) == 35 and len({r.record.id for r in records}) == 35
    for item in records:
        record = item.record
        assert item.prefix == "" and record.answers[0] and _words(record.context) <= 300
        assert "general" in record.id
    assert load_qmsum_general(_words, budget=300, limit=3) == records[:3]


def test_needle_prompts_get_a_prefix_that_asks_for_their_key() -> None:
    records = load_needle_prefixed(_words, limit=4, prefix_tokens=60)
    assert [r.record.id for r in records][:2] == ["needle-1024-0.1-0", "needle-1024-0.3-0"]
    for item in records:
        key = item.record.question.split(" for ", 1)[1].split(" ", 1)[0]
        assert item.prefix.endswith(PREFIX_CLOSING.format(key=key))
        assert 40 <= _words(item.prefix) <= 60 + _words(PREFIX_CLOSING) + 8
    assert len({r.prefix for r in records}) == 4  # each prompt has prose of its own


def test_divergence_is_the_kl_and_the_top1_agreement() -> None:
    reference = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]).log()
    other = torch.tensor([[0.2, 0.7, 0.1], [0.1, 0.1, 0.8]]).log()
    kl, top1 = divergence(reference, other)
    want = torch.nn.functional.kl_div(other[0], reference[0], log_target=True, reduction="sum")
    torch.testing.assert_close(kl[0], want)
    assert float(kl[1]) == pytest.approx(0.0, abs=1e-7) and top1.tolist() == [0.0, 1.0]


@pytest.fixture(scope="module")
def model_and_prompt():
    model, tokenizer = wide_llama(), char_tokenizer()
    prompt = split_prompt(tokenizer, " ".join(PARAGRAPHS) * 2, "Where is Paris?")
    return model, prompt


def test_teacher_forcing_the_full_caches_answer_gives_its_own_distributions(model_and_prompt) -> None:
    model, prompt = model_and_prompt
    prefix = torch.tensor([40, 41, 42])
    budget = TokenBudget(tokens=60, every=8)
    greedy = decode(model, FullDecoding().start(model, prompt.context_ids, budget), prompt, prefix, 12)
    forced = decode(
        model, FullDecoding().start(model, prompt.context_ids, budget), prompt, prefix, 12, greedy.tokens
    )
    assert greedy.tokens.shape == (12,) and torch.equal(forced.tokens, greedy.tokens)
    torch.testing.assert_close(forced.log_probs, greedy.log_probs, rtol=0, atol=1e-5)
    assert len(forced.nbytes) == 1 + 3 + 11  # after the question, each prefix token, each answer token fed
    assert forced.nbytes == sorted(forced.nbytes)  # a full cache only grows


def test_decode_time_rc_stays_at_its_budget_while_prefill_only_grows(model_and_prompt) -> None:
    model, prompt = model_and_prompt
    budget = TokenBudget(tokens=60, every=8)
    runs = {
        method.name: decode(
            model,
            method.start(model, prompt.context_ids, budget),
            prompt,
            torch.tensor([], dtype=torch.long),
            40,
        )
        for method in (RCDecoding(), RCDecoding(question_window=True), RCDecoding(decode_time=False))
    }
    cache = RCKVCache(model, budget=60)
    entry = 2 * 2 * wide_llama().config.head_dim * 4 + 2 * 4  # keys and values of 2 heads, and positions
    layers = len(cache.layers)
    question = prompt.question_ids.shape[1]
    bound = (60 + question + 8) * entry * layers
    assert max(runs["rc"].nbytes) <= bound and max(runs["rc_question"].nbytes) <= bound
    assert runs["rc_prefill_only"].nbytes[-1] > bound  # every generated token kept
    assert runs["rc"].nbytes[-1] < runs["rc_prefill_only"].nbytes[-1]
    cache.close()


def test_kvpress_ratio_keeps_the_budget() -> None:
    assert int(1000 * (1 - prefill_ratio(1000, 256))) == 256
    assert int(999 * (1 - prefill_ratio(999, 300))) == 300
    assert prefill_ratio(200, 256) == 0.0


def test_summary_pairs_every_method_with_rc_on_the_common_records() -> None:
    def row(method: str, record: str, kl: float) -> dict:
        return {
            "method": method, "id": record, "quality": 0.5, "kl": kl, "top1": 0.9, "peak_bytes": 10,
            "full_peak_bytes": 40, "tokens_per_second": 5.0, "answer_tokens": 3, "reference_tokens": 3,
            "nbytes": [8, 10, 10],
        }  # fmt: skip

    rows = [row("rc", r, 0.1) for r in "abc"] + [
        row("kvpress_knorm", r, 0.3 + 0.1 * i) for i, r in enumerate("ab")
    ]
    header = {
        "config": {"task": "qmsum"},
        "model": "m",
        "budget": "b",
        "max_new_tokens": 4,
        "quality": "rougeL",
    }
    results = summarise_long(rows, ["rc", "kvpress_knorm"], header)
    assert results["n_records"] == 2  # c is not done by every method
    knorm = results["methods"]["kvpress_knorm"]
    assert knorm["kl"]["mean"] == pytest.approx(0.35) and knorm["peak_ratio"] == 0.25
    assert knorm["kl_minus_rc"]["mean"] == pytest.approx(0.25)
    interval = knorm["kl_minus_rc"]
    assert interval["low"] == pytest.approx(0.2) and interval["high"] == pytest.approx(0.3)
    assert "kl_minus_rc" not in results["methods"]["rc"] and knorm["nbytes"] == [8, 10, 10]
    assert "| kvpress_knorm | 0.3500 [" in table_long(results)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    return save_tiny(wide_llama(), tmp_path_factory.mktemp("tiny-llama"))


def test_the_needle_task_runs_end_to_end_and_resumes(saved_model, tmp_path, monkeypatch) -> None:
    data = data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(SQUAD))
    out = data / "long"
    arguments = ["--task", "needle", "--model", str(saved_model), "--out", str(out), "--limit", "2"]
    options = ["--methods", "rc,rc_prefill_only", "--budget", "200", "--every", "8", "--prefix-tokens", "20"]
    assert main([*arguments, *options, "--max-new-tokens", "3"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["quality"] == "match" and results["n_records"] == 2
    assert list(results["methods"]) == ["full", "rc", "rc_prefill_only"]
    full, rc = results["methods"]["full"], results["methods"]["rc"]
    assert full["kl"]["mean"] == 0.0 and full["top1"]["mean"] == 1.0 and full["peak_ratio"] == 1.0
    assert rc["kl"]["mean"] >= 0.0 and not math.isnan(rc["kl"]["mean"]) and rc["peak_ratio"] < 1.0
    assert (out / "bytes_held.png").stat().st_size > 0 and "| rc_prefill_only |" in (
        out / "results.md"
    ).read_text()
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == 6
    assert main([*arguments, *options, "--max-new-tokens", "3"]) == 0  # resumed: nothing to run
    assert (out / "records.jsonl").read_text().splitlines() == lines


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown task"):
        LongBenchmarkConfig("squad")
    with pytest.raises(ValueError, match="unknown method"):
        LongBenchmarkConfig("qmsum", methods=("rc", "h2o"))
    with pytest.raises(ValueError, match="token budget"):
        TokenBudget(0, 32)
    with pytest.raises(ValueError, match="unknown scorer"):
        DecodingPressMethod("h2o")
    assert {"full", "rc", "rc_question", "rc_prefill_only", "kvpress_tova"} <= set(long_methods())


@pytest.mark.kvpress
@pytest.mark.parametrize("scorer", ["knorm", "snapkv", "tova", "expected_attention", "streaming_llm"])
def test_kvpress_decoding_presses_hold_the_same_budget_as_rc(model_and_prompt, scorer) -> None:
    model, prompt = model_and_prompt
    budget = TokenBudget(tokens=60, every=8)
    none = torch.tensor([], dtype=torch.long)
    press = decode(
        model, DecodingPressMethod(scorer).start(model, prompt.context_ids, budget), prompt, none, 30
    )
    rc = decode(model, RCDecoding().start(model, prompt.context_ids, budget), prompt, none, 30)
    entry = 2 * 2 * model.config.head_dim * 4  # keys and values of 2 heads
    assert len(press.nbytes) == len(rc.nbytes)
    question = prompt.question_ids.shape[1]
    assert max(press.nbytes) <= (60 + question + 8) * entry * model.config.num_hidden_layers
    assert press.nbytes[-1] < max(press.nbytes)  # cut back during decoding
