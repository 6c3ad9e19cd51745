"""RCAttributor on the offline packaged models: the right sources on real text."""

from __future__ import annotations

import pytest
import torch
from captum.attr import TextTokenInput

from rcattr.attribution.attributor import RCAttributor
from rcattr.demo import ANSWER, example_input
from rcattr.heads.selectors import TopHeads
from rcattr.text.prompting import ContextInput
from tests.default_methods import SPAN_SCORERS

pytestmark = pytest.mark.real_model

FACTS = [
    "The Amazon river carries more water than any other river on Earth.",
    "Honey bees communicate the location of flowers with a waggle dance.",
    "The first transatlantic telegraph cable was completed in 1858 between Ireland and Newfoundland.",
    "Basalt is a fine-grained volcanic rock formed from rapidly cooling lava.",
    "The violin has four strings tuned in perfect fifths.",
]


@pytest.mark.parametrize("scorer", SPAN_SCORERS)
@pytest.mark.parametrize("copied", [0, 2, 4])
def test_a_verbatim_copy_ranks_its_chunk_first(smollm2, scorer: str, copied: int) -> None:
    attributor = RCAttributor(*smollm2, span_scorer=SPAN_SCORERS[scorer])
    result = attributor.attribute(
        ContextInput(FACTS, "Tell me one fact."), FACTS[copied], granularity="chunk"
    )
    assert int(result.seq_attr.argmax()) == copied


@pytest.mark.transformers_line  # the 5.2 leg's smoke test of attribution
def test_each_answer_sentence_goes_to_its_document(smollm2) -> None:
    result = RCAttributor(*smollm2).attribute(
        example_input(), ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert result.token_attr is not None
    assert result.token_attr.argmax(1).tolist() == [0, 1]
    assert bool((result.token_attr.max(1).values > 0.5).all())


def test_a_captum_token_input_gives_the_copied_fact_not_its_first_token(smollm2) -> None:
    model, tokenizer = smollm2
    text = " ".join(FACTS) + " Tell me one fact."
    result = RCAttributor(model, tokenizer).attribute(TextTokenInput(text, tokenizer), FACTS[2])
    start = text.index(FACTS[2])
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    copied = torch.tensor([start <= first < start + len(FACTS[2]) for first, _ in offsets])
    # without a token in front, the first word ("The") took 0.57 of it and the copied fact 0.25
    assert float(result.seq_attr[0]) < 0.05
    assert float(result.seq_attr[copied].sum()) > 0.5 and bool(copied[result.seq_attr.argmax()])


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


def test_gemma_copy_and_head_selection_across_layers(gemma3) -> None:
    model, tokenizer = gemma3
    inp = ContextInput(FACTS, "Tell me one fact.")
    result = RCAttributor(model, tokenizer).attribute(inp, FACTS[3], granularity="chunk")
    assert int(result.seq_attr.argmax()) == 3
    assert 1 <= len(result.head_selection.heads) < 10  # the outlier heads of 72, not a fixed 20
    wide = RCAttributor(model, tokenizer, TopHeads(20)).attribute(inp, FACTS[3], granularity="chunk")
    layers = {layer for layer, _ in wide.head_selection.as_pairs()}
    assert len(layers) > 3  # the scale-free score does not collapse onto a few early layers


TUTORIAL_DOCUMENTS = [
    "The Amazon River flows about 6,400 kilometres through South America. "
    "It carries more water to the sea than any other river.",
    "The Nile is about 6,650 kilometres long and is often called the longest river in the world. "
    "It flows north into the Mediterranean Sea.",
    "The Sahara covers about 9.2 million square kilometres of North Africa. "
    "It is the largest hot desert in the world.",
    "Lake Baikal in Siberia is the deepest lake on Earth. At its deepest point it reaches 1,642 metres.",
]
COPIED = [  # (documents, question, answer, the copied numbers and names in it)
    (None, None, ANSWER, ["330", "3,776", "Eiffel", "Tower", "Mount", "Fuji"]),
    (None, "When was the Eiffel Tower completed?", "In 1889.", ["1889"]),
    (
        TUTORIAL_DOCUMENTS,
        "How long is the Amazon River, and how deep is Lake Baikal?",
        "The Amazon River is about 6,400 kilometres long. Lake Baikal is 1,642 metres deep at its deepest point.",
        ["Amazon", "River", "6,400", "Lake", "Baikal", "1,642"],
    ),
]


@pytest.mark.parametrize("model_name", ["smollm2", "gemma3"])
def test_numbers_and_names_copied_from_the_context_are_not_flagged_and_invented_ones_are(
    model_name, request
) -> None:
    """The README's and tutorial 1's examples: no token of a number or name the context holds is flagged; a
    year and a name the context lacks are."""
    attributor = RCAttributor(*request.getfixturevalue(model_name))
    default = example_input()
    for documents, question, answer, copied in COPIED:
        inp = ContextInput(documents or default.chunks, question or default.question)
        result = attributor.attribute(inp, answer, granularity="chunk")
        flagged = [result.answer_tokens[i] for i in result.unsupported_tokens()]
        for word in copied:
            start = answer.index(word)
            inside = [t.text for t in flagged if start <= t.start < start + len(word)]
            assert not inside, (model_name, answer, word, inside)
    inp = ContextInput(default.chunks, "When was the Eiffel Tower completed?")
    copied = attributor.attribute(inp, "In 1889, by Gustave Eiffel.", granularity="chunk")
    invented = attributor.attribute(inp, "In 1925, by Gustave Eiffel.", granularity="chunk")
    assert copied.token_support is not None and invented.token_support is not None

    def lowest(result, word: str) -> float:
        start = result.answer.index(word)
        inside = [
            i for i, t in enumerate(result.answer_tokens) if t.start < start + len(word) and start < t.end
        ]
        return float(result.token_support[inside].min())

    assert lowest(invented, "1925") < lowest(copied, "1889")
    assert lowest(invented, "Gustave") < 0.25  # the context names nobody: flagged, with "1889" or "1925"


def test_the_shipped_probe_judges_the_default_models_claims_as_the_readme_shows(smollm2) -> None:
    from rcattr.attribution.claim_checks import claim_verdict

    attributor = RCAttributor(*smollm2)
    inputs = ContextInput([FACTS[2], FACTS[3]], "When was the first transatlantic telegraph cable completed?")
    copied = claim_verdict(attributor, inputs, "It was completed in 1858 between Ireland and Newfoundland.")
    invented = claim_verdict(attributor, inputs, "It was completed in 1902 by the Royal Navy.")
    assert copied.by == invented.by == "probe"
    assert not copied.marked and invented.marked  # as the grounding guide shows
    assert invented.reason == "not in the documents: '1902'"
