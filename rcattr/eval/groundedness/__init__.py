"""The groundedness benchmarks (`python -m rcattr.eval.groundedness`): context relevance on SQuAD v2 and
unsupported tokens in edited QuoteSum / Veri-Gran answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.lazy import lazy_exports

if TYPE_CHECKING:
    from rcattr.eval.groundedness.cli import main

# imported on first use: `python -m rcattr.eval.groundedness` locks its run folder before torch loads
__getattr__, __dir__, __all__ = lazy_exports(__name__, {".cli": ["main"]})
