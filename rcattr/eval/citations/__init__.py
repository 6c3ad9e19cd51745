"""The citation benchmark (`python -m rcattr.eval.citations`): do the documents a result cites for each
answer sentence match the gold labels of QuoteSum and Veri-Gran? The rule behind
[`RCAttributionResult.citations`][rcattr.attribution.result.RCAttributionResult.citations] is chosen on a dev part
of each file and checked on the part held back ([`rcattr.eval.citations.rules`][rcattr.eval.citations.rules])."""
