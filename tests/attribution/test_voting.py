"""The vote strategies (rcattr.attribution.voting): the heads' span scores summed by mass or share, by hand."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.voting import HeadEvidence, HeadVote, vote
from rcattr.heads.selectors import TopHeads
from tests.helpers import char_tokenizer
from tests.helpers.attribution import ANSWER, INPUT

EVIDENCE = torch.tensor([[3.0, 1.0], [0.1, 0.3]], dtype=torch.float64)  # two heads, two spans


def test_mass_sums_the_scores_and_share_each_heads_share() -> None:
    torch.testing.assert_close(
        vote(EVIDENCE, None, "mass"), torch.tensor([3.1, 1.3], dtype=torch.float64) / 4.4
    )
    shares = torch.tensor([0.75 + 0.25, 0.25 + 0.75], dtype=torch.float64) / 2
    torch.testing.assert_close(vote(EVIDENCE, None, "share"), shares)
    weighted = vote(EVIDENCE, torch.tensor([1.0, 0.0]), "share")
    torch.testing.assert_close(weighted, torch.tensor([0.75, 0.25], dtype=torch.float64))
    with pytest.raises(ValueError, match="unknown votes 'most'"):
        HeadVote("most")  # type: ignore[arg-type]


def test_a_plain_vote_is_the_combined_scores_and_fills_nothing() -> None:
    evidence = HeadEvidence(EVIDENCE, EVIDENCE[:, None].expand(2, 3, 2))
    answer, units = HeadVote("mass").combine(evidence, None)
    assert torch.equal(answer, vote(EVIDENCE, None, "mass")) and units.shape == (3, 2)
    voted = HeadVote("mass")(None, evidence, None)  # type: ignore[arg-type]
    assert torch.equal(voted.seq_attr, answer) and torch.equal(voted.token_attr, units)
    assert voted.lexical_share is None


def test_the_attributor_takes_a_vote_strategy_as_its_votes(llama) -> None:
    tokenizer = char_tokenizer()
    by_name = RCAttributor(llama, tokenizer, TopHeads(4), votes="mass", lexical=False)
    by_object = RCAttributor(llama, tokenizer, TopHeads(4), votes=HeadVote("mass"))
    assert by_object.votes == "mass" and by_object.voting == HeadVote("mass")
    with pytest.raises(ValueError, match="give LexicalFusion"):
        RCAttributor(llama, tokenizer, votes=HeadVote("mass"), lexical=True)  # not silently replaced
    ours, theirs = (a.attribute(INPUT, ANSWER, output_granularity="sentence") for a in (by_name, by_object))
    assert torch.equal(ours.seq_attr, theirs.seq_attr) and torch.equal(ours.token_attr, theirs.token_attr)
