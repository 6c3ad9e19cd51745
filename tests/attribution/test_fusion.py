import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.attribution.fusion import head_agreement, lexical_fusion


def test_agreement_is_the_weighted_share_of_heads_whose_top_span_is_the_votes():
    evidence = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1]])  # tops: 0, 1, 0
    vote = torch.tensor([0.5, 0.4, 0.1])
    assert head_agreement(evidence, None, vote).item() == 2 / 3
    assert head_agreement(evidence, torch.tensor([1.0, 2.0, 1.0]), vote).item() == 0.5


def test_agreement_is_per_output_unit():
    evidence = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])  # [k=2, U=2, S=2]
    vote = torch.tensor([[0.9, 0.1], [0.4, 0.6]])
    assert head_agreement(evidence, None, vote).tolist() == [1.0, 0.5]


def test_full_agreement_keeps_the_vote_and_none_gives_the_lexical_shares():
    vote = torch.tensor([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]])
    lexical = torch.tensor([[0.0, 3.0, 1.0], [0.0, 3.0, 1.0]])
    fused = lexical_fusion(vote, lexical, torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(fused[0], vote[0].double())
    torch.testing.assert_close(fused[1], torch.tensor([0.0, 0.75, 0.25], dtype=torch.float64))


@pytest.mark.parametrize("agreement", [0.4, 0.0])
def test_a_unit_with_no_lexical_match_keeps_its_vote(agreement):
    """Even where no head agrees with the vote (a gate of 0 would leave nothing)."""
    vote = torch.tensor([0.2, 0.5, 0.3])
    fused = lexical_fusion(vote, torch.zeros(3), torch.tensor(agreement))
    torch.testing.assert_close(fused, vote.double())


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_fusion_is_a_distribution_between_the_vote_and_the_lexical_shares(units, spans, seed):
    generator = torch.Generator().manual_seed(seed)
    vote = torch.rand(units, spans, generator=generator, dtype=torch.float64)
    vote = vote / vote.sum(-1, keepdim=True)
    lexical = torch.rand(units, spans, generator=generator, dtype=torch.float64) * 5
    gate = torch.rand(units, generator=generator, dtype=torch.float64)
    fused = lexical_fusion(vote, lexical, gate)
    torch.testing.assert_close(fused.sum(-1), torch.ones(units, dtype=torch.float64))
    shares = lexical / lexical.sum(-1, keepdim=True)
    assert bool((fused >= torch.minimum(vote, shares) - 1e-12).all())
    assert bool((fused <= torch.maximum(vote, shares) + 1e-12).all())


def test_lexical_fusion_fills_a_vote_with_bm25_and_says_how_much_it_filled(llama) -> None:
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.attribution.fusion import LexicalFusion, fuse_where_heads_disagree
    from rcattr.heads.selectors import TopHeads
    from tests.helpers import char_tokenizer
    from tests.helpers.attribution import ANSWER, INPUT

    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(5), votes=LexicalFusion("share"))
    example = attributor.prepare(INPUT, ANSWER, "sentence", "sentence")
    reducer = attributor.run_pass(example, {attributor.scorer_name: attributor.scorer})
    selection = attributor.select_heads(reducer)
    voted = attributor.span_scores(example, reducer, selection)
    evidence = attributor._evidence(reducer, selection)
    combined = LexicalFusion().combine(evidence, selection.weights)
    answer, units, share = fuse_where_heads_disagree(combined, tuple(evidence), selection.weights, example)
    assert torch.equal(voted.seq_attr, answer) and torch.equal(voted.token_attr, units)
    assert voted.lexical_share == share
    result = attributor.attribute(INPUT, ANSWER, granularity="sentence", output_granularity="sentence")
    torch.testing.assert_close(result.seq_attr, answer.detach().float())
    assert result.lexical_share == pytest.approx(share) and result.rc.lexical_share == result.lexical_share
    assert f"BM25 filled {share:.0%} of the votes" in result.head_selection.describe(result.lexical_share)
    assert result.to_dict()["heads"]["lexical_share"] == result.lexical_share
