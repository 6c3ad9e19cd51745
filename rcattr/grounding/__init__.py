"""What an answer's grounding says, read from an attribution's record (`rcattr.record`): token support (support),
the claims of an answer (claims), the citation rule (citation_rule), citations (citations), how much the
documents vouch for a sentence (vouching), the support probe (probe) and a sentence's verdict (verdict)."""
