"""The groundedness benchmarks (``python -m rcattr.eval.groundedness``): context relevance on SQuAD v2 and
unsupported tokens in edited QuoteSum / Veri-Gran answers.
"""

from rcattr.eval.groundedness.benchmark import (
    main,
)

__all__ = ["main"]
