"""The attribution pipeline: RCAttributor (attributor) on SpanAttributor (base, many), one example's token
layout (example), the streaming reduction of a pass (reduction) and the per-token signals read from it
(token_signals), span scorers (scorers, spans), the heads' vote (voting, fusion, lexical), every head's
statistics of an answer (head_statistics), a claim checked by its attribution (claim_checks) and the result,
the record (`rcattr.record`) with its grounding and views as methods (result)."""
