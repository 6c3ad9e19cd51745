"""ContextCite through its package (rcattr.baselines.context_cite): the ablated prompts it scores, one surrogate per unit."""

from __future__ import annotations

import torch

from rcattr.baselines import (
    ContextCiteAttributor,
    RandomAttributor,
)
from rcattr.baselines.context_cite import _citer
from rcattr.baselines.peers import import_peer
from rcattr.baselines.perturbation import span_template
from tests.helpers.attribution import ANSWER, BRACED_INPUT
from tests.reference import forward_log_probs


def test_context_cite_scores_the_ablated_prompts_it_is_given(llama, tokenizer) -> None:
    """The package's partitioner holds rcattr's prompt with the spans as sources, and its ablation scores are
    the answer's logit-probabilities under the prompt with the masked spans removed."""
    example = RandomAttributor(llama, tokenizer).prepare(BRACED_INPUT, ANSWER, "sentence")
    citer = _citer(import_peer("context_cite"), llama, tokenizer, example, {"num_ablations": 6})
    assert citer.partitioner.get_context() == example.prompt.text
    assert citer.sources == [span.text for span in example.context_spans]
    template = span_template(example)
    answer_ids = example.ids[0, example.answer_start :].tolist()
    masks, logit_probs = citer._masks, citer._logit_probs  # the package's ablations, [6, n_spans] and [6, A]
    assert masks.shape == (6, 4) and logit_probs.shape == (6, len(answer_ids))
    for mask, scores in zip(masks, logit_probs, strict=True):
        values = [span.text if kept else "" for span, kept in zip(example.context_spans, mask, strict=True)]
        prompt_ids = tokenizer(template.template.format(*values), add_special_tokens=False)["input_ids"]
        log_p = forward_log_probs(llama, prompt_ids, answer_ids)
        logit = log_p - torch.log1p(-log_p.exp())
        torch.testing.assert_close(torch.as_tensor(scores).double(), logit, atol=2e-3, rtol=1e-3)


def test_context_cite_fits_one_surrogate_per_unit(llama, tokenizer) -> None:
    result = ContextCiteAttributor(llama, tokenizer, num_ablations=8).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    again = ContextCiteAttributor(llama, tokenizer, num_ablations=8).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert result.seq_attr.shape == (3,) and result.token_attr.shape == (2, 3)
    assert torch.equal(result.token_attr, again.token_attr)  # the package seeds its masks
