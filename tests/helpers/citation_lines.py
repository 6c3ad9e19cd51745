"""Hand-made row lines of the citation benchmark: sentences with their documents' shares, gold and vouching."""

from __future__ import annotations


def sentence_line(shares: list[float], gold: list[int], reliance: float = 0.5) -> dict:
    """A sentence's row: its documents' shares, its gold documents and its context reliance."""
    return {"shares": shares, "gold": gold, "reliance": reliance, "support": 0.5, "groundedness": 0.5}


LINES = [
    {
        "id": "a",
        "held_back": False,
        "sentences": [sentence_line([0.7, 0.3, 0.0], [0]), sentence_line([0.45, 0.55, 0.0], [0, 1])],
        "foreign": [sentence_line([0.2, 0.1, 0.7], [], reliance=0.1)],
    },
    {"id": "b", "held_back": False, "sentences": [sentence_line([0.1, 0.1, 0.8], [1])], "foreign": []},
]


def vouched_sentence(sentence: dict, vouch: float, status: str) -> dict:
    """``sentence`` with its vouching (``vouch``, ``status``) and the other signals a row holds."""
    claims = [["number", vouch > 0, 0.5]]
    return {
        **sentence,
        "vouch": vouch,
        "status": status,
        "claims": claims,
        "coverage": vouch,
        "logprob": -1.0,
        "neg_entropy": -1.0,
        "lookback": 0.5,
    }


def vouched_lines() -> list[dict]:
    """LINES with each sentence vouched for: the answers' well (but one), the appended ones not."""
    return [
        {
            **line,
            "sentences": [
                vouched_sentence(sentence, 0.9 if i else 0.3, "supported" if i else "weak")
                for i, sentence in enumerate(line["sentences"])
            ],
            "foreign": [vouched_sentence(sentence, 0.0, "unsupported") for sentence in line["foreign"]],
        }
        for line in LINES
    ]
