"""The shipped example (rcattr.demo): its answer quotes its first two documents."""

from __future__ import annotations

from rcattr.demo import ANSWER, DOCUMENTS, QUESTION, example_input


def test_the_example_input_holds_the_documents_and_question() -> None:
    inp = example_input()
    assert list(inp.chunks) == list(DOCUMENTS) and inp.question == QUESTION


def test_each_answer_sentence_comes_from_its_own_document() -> None:
    first, second = ANSWER.split(". ", 1)
    assert "330 metres tall" in first and "330 metres tall" in DOCUMENTS[0]
    assert "3,776 metres" in second and "3,776 metres" in DOCUMENTS[1]
    assert "3,776" not in DOCUMENTS[0] and "330" not in DOCUMENTS[1]
