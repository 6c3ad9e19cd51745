"""RCAttributor on the offline packaged models: the right sources on real text."""

from __future__ import annotations

import pytest
import torch

from rcattr.attributor import RCAttributor
from rcattr.demo import ANSWER, example_input
from rcattr.models import load_model
from rcattr.prompting import ContextInput
from rcattr.selectors import TopHeads

pytestmark = pytest.mark.real_model

FACTS = [
    "The Amazon river carries more water than any other river on Earth.",
    "Honey bees communicate the location of flowers with a waggle dance.",
    "The first transatlantic telegraph cable was completed in 1858 between Ireland and Newfoundland.",
    "Basalt is a fine-grained volcanic rock formed from rapidly cooling lava.",
    "The violin has four strings tuned in perfect fifths.",
]


@pytest.mark.parametrize("scorer", ["attention", "rc", "rc_bound"])
@pytest.mark.parametrize("copied", [0, 2, 4])
def test_a_verbatim_copy_ranks_its_chunk_first(smollm2, scorer: str, copied: int) -> None:
    attributor = RCAttributor(*smollm2, span_scorer=scorer)
    result = attributor.attribute(
        ContextInput(FACTS, "Tell me one fact."), FACTS[copied], granularity="chunk"
    )
    assert int(result.seq_attr.argmax()) == copied


def test_each_answer_sentence_goes_to_its_document(smollm2) -> None:
    result = RCAttributor(*smollm2).attribute(
        example_input(), ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert result.token_attr is not None
    assert result.token_attr.argmax(1).tolist() == [0, 1]
    assert bool((result.token_attr.max(1).values > 0.5).all())


def test_generated_and_given_answers_agree_on_the_real_model(smollm2) -> None:
    attributor = RCAttributor(*smollm2)
    generated = attributor.attribute(example_input(), gen_args={"max_new_tokens": 24})
    given = attributor.attribute(example_input(), generated.answer)
    # the generated answer continues its generation's cache, the given one runs in one forward: the
    # same heads, and the same scores up to float32 rounding
    assert torch.equal(generated.head_selection.heads, given.head_selection.heads)
    torch.testing.assert_close(generated.seq_attr, given.seq_attr, atol=1e-4, rtol=1e-4)


def test_a_hallucinated_sentence_is_less_grounded(smollm2) -> None:
    answer = "The Eiffel Tower is 330 metres tall. It was painted green by Napoleon in 1702."
    result = RCAttributor(*smollm2).attribute(example_input(), answer, granularity="chunk")
    split = next(i for i, token in enumerate(result.answer_tokens) if token.start >= answer.index("It"))
    quoted, invented = result.groundedness[1:split], result.groundedness[split:]
    assert float(quoted.mean()) > float(invented.mean()) + 0.1


def test_gemma_copy_and_head_selection_across_layers() -> None:
    model, tokenizer = load_model("gemma-3-270m")
    inp = ContextInput(FACTS, "Tell me one fact.")
    result = RCAttributor(model, tokenizer).attribute(inp, FACTS[3], granularity="chunk")
    assert int(result.seq_attr.argmax()) == 3
    assert 1 <= len(result.head_selection.heads) < 10  # the outlier heads of 72, not a fixed 20
    wide = RCAttributor(model, tokenizer, TopHeads(20)).attribute(inp, FACTS[3], granularity="chunk")
    layers = {layer for layer, _ in wide.head_selection.as_pairs()}
    assert len(layers) > 3  # the scale-free score does not collapse onto a few early layers
