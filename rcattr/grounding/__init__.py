"""What an answer's grounding says: the per-token signals and how they are measured (signals, token_signals),
token support (support), the claims of an answer (claims), citations (citations) and how much the documents
vouch for a sentence (vouching)."""
