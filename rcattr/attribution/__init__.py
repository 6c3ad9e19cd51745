"""The attribution pipeline: RCAttributor (attributor) on SpanAttributor (base, many), one example's token
layout (example), the streaming reduction of a pass (reduction), span scorers (scorers, spans), the heads' vote
(voting, fusion, lexical) and the result (result, attributed)."""
