"""The citation rules (rcattr.eval.citations.rules): counts and scores by their definitions, the best rule on dev."""

from __future__ import annotations

import pytest

from rcattr.eval.citations.rules import VOUCHED, CandidateRule, best, counts, evaluate, labelled, scores
from tests.helpers.citation_lines import LINES, sentence_line, vouched_lines


def test_counts_and_scores_follow_their_definitions() -> None:
    top = counts(CandidateRule(1.0, 1), LINES)
    # correct, cited, gold, sentences, foreign, foreign cited, foreign uncited
    assert top.tolist() == [[2, 2, 3, 2, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]]
    precision, recall, withheld, f1 = scores(top.sum(0))
    assert (precision, recall, withheld) == (2 / 3, 2 / 4, 0.0)
    assert f1 == pytest.approx(2 * 2 / (3 + 4))
    two = counts(CandidateRule(0.8, 2, signal="reliance", threshold=0.3), LINES).sum(0)
    assert two.tolist() == [3, 4, 4, 3, 1, 0, 1]  # (0.45 >= 0.8 x 0.55) cites both of sentence 2
    assert counts(CandidateRule(0.2, 3, relative=False), LINES)[0].tolist()[:2] == [3, 4]


def test_the_best_rule_is_chosen_on_the_dev_part_only() -> None:
    # held back: a second document near the best one, never gold, which a one-document rule gets right
    near = [sentence_line([0.5, 0.45, 0.05], [0]) for _ in range(10)]
    held = [{**line, "held_back": True, "sentences": near} for line in LINES]
    rules = [
        CandidateRule(1.0, 1),
        CandidateRule(0.8, 2),
        CandidateRule(0.8, 2, signal="reliance", threshold=0.3),
    ]
    assert best(rules, {"quotesum": LINES + held}) == CandidateRule(
        0.8, 2
    )  # F1 0.75 against 0.57; ties: the first
    flipped = [{**line, "held_back": not line["held_back"]} for line in LINES + held]
    assert best(rules, {"quotesum": flipped}) == CandidateRule(1.0, 1)


def test_only_labelled_sentences_count_where_a_file_marks_one_statement() -> None:
    lines = {"verigran": LINES, "quotesum": LINES}
    kept = labelled(
        {
            name: [{**LINES[0], "sentences": [*LINES[0]["sentences"], sentence_line([1.0], [])]}]
            for name in lines
        }
    )
    assert len(kept["verigran"][0]["sentences"]) == 2 and len(kept["quotesum"][0]["sentences"]) == 3


def test_the_library_s_rule_withholds_unsupported_sentences_only_on_vouched_rows() -> None:
    assert VOUCHED not in evaluate({"quotesum": LINES}, n_boot=20)["families"]
    results = evaluate({"quotesum": vouched_lines()}, n_boot=20)
    vouched = results["families"][VOUCHED]
    assert (vouched["signal"], vouched["threshold"]) == ("vouch", 0.25)
    table = results["tables"]["quotesum/dev"][VOUCHED]
    assert table["foreign_uncited"][0] == 1.0 and table["f1_minus_chosen"][0] == 0.0


def test_the_library_s_rule_withholds_by_the_held_part_on_rows_that_have_it() -> None:
    """Issue 59: a partly held sentence is cited by its held part's support, which rows since then keep."""
    lines = [
        {
            **line,
            "sentences": [{**s, "held_support": s["vouch"]} for s in line["sentences"]],
            "foreign": [{**s, "held_support": 0.9, "status": "partial"} for s in line["foreign"]],
        }
        for line in vouched_lines()
    ]
    results = evaluate({"quotesum": lines}, n_boot=20)
    assert results["families"][VOUCHED]["signal"] == "held_support"
    assert results["tables"]["quotesum/dev"][VOUCHED]["foreign_uncited"][0] == 0.0  # cited: it is partly held
