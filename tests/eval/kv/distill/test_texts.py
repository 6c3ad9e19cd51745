"""The fitting texts (rcattr.eval.kv.distill.texts): the three sources in turn, each filling its tokens, from the
end of the files."""

from __future__ import annotations

from rcattr.eval.kv.distill.texts import fitting_texts


def test_the_fitting_texts_alternate_sources_and_fit_their_tokens() -> None:
    texts = fitting_texts(len, 3000, 6)  # characters stand in for tokens
    assert [text.id.split("-")[0] for text in texts] == ["squad", "qmsum", "quotesum"] * 2
    assert len({text.id for text in texts}) == 6
    assert all(2400 <= len(text.text) <= 3000 for text in texts)
    assert int(texts[0].id.split("-")[1]) >= 8  # from the end of the file, away from the benchmark's contexts
