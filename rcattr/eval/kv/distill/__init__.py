"""Fitting :class:`~rcattr.kvcache.distilled.ScorePredictor`: plain prose from ``data/`` (:mod:`.texts`), the replay
scores it learns (:mod:`.teacher`), ridge maps fitted from sufficient statistics with penalties chosen by
context-grouped cross-validation (:mod:`.ridge`), held-out rank correlation and a learning curve
(:mod:`.evaluate`); ``python -m rcattr.eval.kv.distill`` runs it all (:mod:`.cli`)."""
