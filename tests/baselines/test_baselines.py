"""Baselines on a tiny random model: the shared interface, and each method against a brute force."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from captum.attr import LayerIntegratedGradients, LLMGradientAttribution, TextTokenInput

from rcattr.attributor import RCAttributor
from rcattr.baselines import (
    BASELINES,
    AblationAttributor,
    AttentionAttributor,
    BM25Attributor,
    HiddenStateAttributor,
    HybridAttributor,
    IntegratedGradientsAttributor,
    RandomAttributor,
)
from rcattr.baselines.hidden_state import layer_output
from rcattr.baselines.hybrid import reciprocal_rank_fusion
from rcattr.baselines.perturbation import span_template
from rcattr.eval.attribution.faithfulness import answer_log_probs
from rcattr.lexical import bm25_terms
from rcattr.prompting import ContextInput
from rcattr.result import RCAttributionResult
from rcattr.selectors import FixedHeads
from tests.helpers import tiny_model

DOCUMENTS = ["The cat sat. It purred.", "Dogs bark {loudly}.", "Birds fly south in May."]
QUESTION = "What did the cat do?"
ANSWER = "It sat. Then it purred."
INPUT = ContextInput(DOCUMENTS, QUESTION)


def _make(name: str, model, tokenizer):
    options = {"n_steps": 2} if name == "integrated_gradients" else {}
    return BASELINES[name](model, tokenizer, **options)


@pytest.mark.parametrize("name", sorted(BASELINES))
@pytest.mark.parametrize("granularity", ["chunk", "sentence"])
def test_every_baseline_shares_the_interface(llama, tokenizer, name: str, granularity: str) -> None:
    result = _make(name, llama, tokenizer).attribute(
        INPUT, ANSWER, granularity=granularity, output_granularity="sentence"
    )
    assert isinstance(result, RCAttributionResult)
    n_spans = 3 if granularity == "chunk" else 4
    assert result.seq_attr.shape == (n_spans,)
    assert result.token_attr is not None and result.token_attr.shape == (2, n_spans)
    assert torch.isfinite(result.token_attr).all()
    assert [span.text for span in result.output_spans] == ["It sat.", "Then it purred."]
    assert result.input_tokens == [span.text for span in result.context_spans]
    assert result.top(1)[0][0] in result.context_spans


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_whole_answer_result_keeps_its_sentences_rows_for_citations(llama, tokenizer, name: str) -> None:
    result = _make(name, llama, tokenizer).attribute(INPUT, ANSWER, granularity="chunk")
    assert (
        result.token_attr is not None and result.token_attr.shape == (1, 3) and len(result.output_spans) == 1
    )
    rows = result.sentence_rows
    assert rows is not None and [span.text for span in rows.spans] == ["It sat.", "Then it purred."]
    assert rows.scores.shape == (2, 3) and torch.isfinite(rows.scores).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # per sentence: nothing cited together
        assert [citation.text for citation in result.citations()] == ["It sat.", "Then it purred."]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_an_empty_retrieved_chunk_is_a_document_that_scores_zero(llama, tokenizer, name: str) -> None:
    with pytest.warns(UserWarning, match="context chunk 1 is empty or only whitespace"):
        result = _make(name, llama, tokenizer).attribute(
            ContextInput([DOCUMENTS[0], " \n ", DOCUMENTS[2]], QUESTION), ANSWER, granularity="chunk"
        )
    assert len(result.documents) == 3 and result.chunks[1] == ""
    assert float(result.seq_attr[1]) == 0.0 and result.token_attr is not None
    assert bool((result.token_attr[:, 1] == 0).all()) and torch.isfinite(result.seq_attr).all()


def test_attention_baseline_is_rc_over_every_head(llama, tokenizer) -> None:
    every_head = [(layer, head) for layer in range(3) for head in range(4)]
    fixed = RCAttributor.paper(llama, tokenizer, heads=FixedHeads(every_head)).attribute(
        INPUT, ANSWER, granularity="chunk"
    )
    baseline = AttentionAttributor(llama, tokenizer).attribute(INPUT, ANSWER, granularity="chunk")
    torch.testing.assert_close(baseline.seq_attr, fixed.seq_attr)
    assert len(baseline.head_selection.heads) == 12
    assert (baseline.span_scorer, fixed.span_scorer) == ("attention, all heads", "attention")


def test_reciprocal_rank_fusion() -> None:
    first = torch.tensor([[0.9, 0.1, 0.5]])  # ranks 0, 2, 1
    second = torch.tensor([[0.0, 3.0, 2.0]])  # ranks 2, 0, 1
    fused = reciprocal_rank_fusion(first, second, offset=1.0)
    torch.testing.assert_close(
        fused, torch.tensor([[1 + 1 / 3, 1 / 3 + 1, 1 / 2 + 1 / 2]], dtype=torch.float64)
    )
    assert reciprocal_rank_fusion(torch.tensor([1.0, 1.0])).tolist() == [1 / 60, 1 / 61]  # ties by index


def test_hybrid_fuses_rc_and_bm25_ranks(llama, tokenizer) -> None:
    hybrid = HybridAttributor(llama, tokenizer).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    rc = RCAttributor(llama, tokenizer).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    bm25 = BM25Attributor(llama, tokenizer).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert rc.token_attr is not None and bm25.token_attr is not None
    expected = reciprocal_rank_fusion(rc.token_attr, bm25.token_attr)
    torch.testing.assert_close(hybrid.token_attr, (expected / expected.sum(-1, keepdim=True)).float())
    assert hybrid.span_scorer == "hybrid: RC + BM25"


def _lucene_bm25(query: list[str], corpus: list[list[str]], k1: float = 1.5, b: float = 0.75) -> list[float]:
    average = sum(map(len, corpus)) / len(corpus)
    scores = []
    for document in corpus:
        total = 0.0
        for term in set(query):
            n = sum(term in other for other in corpus)
            if n:
                idf = math.log(1 + (len(corpus) - n + 0.5) / (n + 0.5))
                tf = document.count(term)
                total += idf * tf / (tf + k1 * (1 - b + b * len(document) / average))
        scores.append(total)
    return scores


def test_bm25_matches_the_lucene_formula(llama, tokenizer) -> None:
    result = BM25Attributor(llama, tokenizer).attribute(
        INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    corpus = [bm25_terms(span.text) for span in result.context_spans]
    expected = [_lucene_bm25(bm25_terms(unit), corpus) for unit in ("It sat.", "Then it purred.")]
    torch.testing.assert_close(result.token_attr, torch.tensor(expected), atol=1e-5, rtol=1e-5)
    assert result.top(1, output=1)[0][0].text == "It purred."


def test_bm25_separates_two_sources(llama, tokenizer) -> None:
    # Okapi's idf is 0 for a term in one of two documents; Lucene's is not
    result = BM25Attributor(llama, tokenizer).attribute(
        ContextInput(["The cat sat on a mat.", "Loud dogs bark at night."]), "dogs bark", granularity="chunk"
    )
    assert result.seq_attr[1] > 0 and result.seq_attr[0] == 0


def test_hidden_state_matches_brute_force(llama, tokenizer) -> None:
    attributor = HiddenStateAttributor(llama, tokenizer, layer=2)
    example = attributor.prepare(INPUT, ANSWER, "chunk", "answer")
    result = attributor.attribute(INPUT, ANSWER, granularity="chunk")
    with torch.no_grad():
        hidden = llama(example.ids, output_hidden_states=True).hidden_states[2][0]
    expected = torch.zeros(3)
    for row in range(example.answer_start, example.ids.shape[1]):
        best, best_span = -2.0, None
        for span, positions in enumerate(example.context_ranges):
            for position in positions:
                similarity = float(F.cosine_similarity(hidden[row], hidden[position], dim=0))
                if similarity > best:
                    best, best_span = similarity, span
        expected[best_span] += max(best, 0.0)
    torch.testing.assert_close(result.seq_attr, expected, atol=1e-4, rtol=1e-4)


def test_a_layers_output_is_read_without_running_the_layers_above(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.tensor([[5, 9, 2, 7, 11, 3, 8]])
    n_layers = model.config.get_text_config().num_hidden_layers
    with torch.no_grad():
        expected = model(ids, output_hidden_states=True).hidden_states
        above = model.get_decoder().layers[-1]
        ran = []
        hook = above.register_forward_hook(lambda *_: ran.append(True))
        try:
            for layer in range(1, n_layers + 1):
                torch.testing.assert_close(layer_output(model, ids, layer), expected[layer], atol=0, rtol=0)
        finally:
            hook.remove()
    assert len(ran) == 1  # only the last layer's read ran the last layer


def test_hidden_state_layer_out_of_range(llama, tokenizer) -> None:
    with pytest.raises(ValueError, match="layers 1..3"):
        HiddenStateAttributor(llama, tokenizer, layer=7)


def test_ablation_is_the_log_prob_drop_of_removing_each_chunk(llama, tokenizer) -> None:
    result = AblationAttributor(llama, tokenizer).attribute(INPUT, ANSWER, granularity="chunk")
    # Removing a chunk's text (captum's empty baseline) = the prompt with that chunk emptied; the char
    # tokenizer adds no special tokens, so captum's tokens are rcattr's.
    full = answer_log_probs(llama, tokenizer, INPUT, ANSWER, torch.ones(1, 3, dtype=torch.bool))[0]
    example = AblationAttributor(llama, tokenizer).prepare(INPUT, ANSWER, "chunk")
    template = span_template(example)
    answer_ids = example.ids[0, example.answer_start :]
    for index in range(3):
        values = [value if i != index else "" for i, value in enumerate(DOCUMENTS)]
        ids = tokenizer(template.template.format(*values), add_special_tokens=False).input_ids
        sequence = torch.tensor([ids + answer_ids.tolist()])
        with torch.no_grad():
            log_probs = llama(sequence).logits[0].double().log_softmax(-1)
        ablated = sum(float(log_probs[len(ids) - 1 + j, t]) for j, t in enumerate(answer_ids.tolist()))
        assert float(result.seq_attr[index]) == pytest.approx(float(full) - ablated, abs=1e-3)


def test_span_template_escapes_braces_and_rejects_overlaps(llama, tokenizer) -> None:
    example = AblationAttributor(llama, tokenizer).prepare(INPUT, ANSWER, "chunk")
    template = span_template(example)
    assert template.template.format(*DOCUMENTS) == example.prompt.text
    overlapping = AblationAttributor(llama, tokenizer).prepare("abcdef", ANSWER, [(0, 3), (2, 5)])
    with pytest.raises(ValueError, match="non-overlapping"):
        span_template(overlapping)


def test_integrated_gradients_sums_captum_token_attributions(llama, tokenizer) -> None:
    result = IntegratedGradientsAttributor(llama, tokenizer, n_steps=3).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    example = RandomAttributor(llama, tokenizer).prepare(INPUT, ANSWER, "chunk", "sentence")
    captum = LLMGradientAttribution(LayerIntegratedGradients(llama, llama.get_input_embeddings()), tokenizer)
    raw = captum.attribute(
        TextTokenInput(example.prompt.text, tokenizer),
        target=example.ids[0, example.answer_start :],
        n_steps=3,
    ).token_attr  # [answer tokens, prompt tokens]
    per_span = torch.stack([raw[:, r].sum(-1) for r in example.context_ranges], dim=-1)
    torch.testing.assert_close(result.seq_attr, per_span.sum(0), atol=1e-4, rtol=1e-4)
    expected_units = torch.stack([per_span[list(rows)].sum(0) for rows in example.unit_ranges])
    torch.testing.assert_close(result.token_attr, expected_units, atol=1e-4, rtol=1e-4)


def test_random_depends_on_the_seed_and_the_example_only(llama, tokenizer) -> None:
    attributor = RandomAttributor(llama, tokenizer, seed=3)
    first = attributor.attribute(INPUT, ANSWER, granularity="chunk")
    other_answer = attributor.attribute(INPUT, "Something else entirely.", granularity="chunk")
    again = attributor.attribute(INPUT, ANSWER, granularity="chunk")  # whatever ran in between
    torch.testing.assert_close(first.token_attr, again.token_attr)
    fresh = RandomAttributor(llama, tokenizer, seed=3).attribute(INPUT, ANSWER, granularity="chunk")
    torch.testing.assert_close(first.token_attr, fresh.token_attr)
    other_seed = RandomAttributor(llama, tokenizer, seed=4).attribute(INPUT, ANSWER, granularity="chunk")
    assert not torch.equal(first.seq_attr, other_seed.seq_attr)
    assert not torch.equal(first.seq_attr, other_answer.seq_attr)


def test_baselines_reject_bad_input(llama, tokenizer) -> None:
    bm25 = BM25Attributor(llama, tokenizer)
    with pytest.raises(ValueError, match="empty"):
        bm25.attribute(ContextInput(["   "]), ANSWER)
    with pytest.raises(ValueError, match="target is empty"):
        bm25.attribute(INPUT, "  ")
    with pytest.raises(ValueError, match="window"):
        bm25.attribute(INPUT, "x" * 400)
