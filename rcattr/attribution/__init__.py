"""The attribution pipeline: RCAttributor (attributor) on SpanAttributor (base, many), one example's token
layout (example), the streaming reduction of a pass (reduction) and the per-token signals read from it
(token_signals), span scorers (scorers, spans), the heads' vote (voting, fusion, lexical), the record of what
was found (record, attributed) and the result with its grounding and views as methods (result)."""
