"""The long-generation benchmark's tasks (rcattr.eval.kv_long.data): QMSum's general queries, needle prompts with
a prefix of their own."""

from __future__ import annotations

from rcattr.eval.kv_long.data import PREFIX_CLOSING, load_needle_prefixed, load_qmsum_general


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
