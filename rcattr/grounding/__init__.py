"""What an answer's grounding says, read from an attribution's record: the per-token signals (signals), token
support (support), the claims of an answer (claims), the citation rule (citation_rule), citations (citations),
how much the documents vouch for a sentence (vouching), the heads' statistics of a claim (head_statistics) and
the support probe (probe)."""
