"""Attention heads: every head's score (scores), the selection an attribution used (selection: HeadSelection)
and the strategies that select heads (selectors: OutlierHeads, TopHeads, FixedHeads)."""
