"""Fitting [`ScorePredictor`][rcattr.kvcache.distilled.ScorePredictor]: plain prose from `data/` (`texts`), the replay
scores it learns (`teacher`), ridge maps fitted from sufficient statistics with penalties chosen by
context-grouped cross-validation (`ridge`), held-out rank correlation and a learning curve
(`evaluate`); `python -m rcattr.eval.kv.distill` runs it all (`cli`)."""
