"""The attribution benchmark's settings (rcattr.eval.attribution.config): records per method."""

from __future__ import annotations

from rcattr.eval.attribution.config import BenchmarkConfig


def test_a_method_runs_on_its_own_limit_within_the_runs() -> None:
    config = BenchmarkConfig("quotesum", limit=10, method_limits={"ig": 3, "shapley": 50})
    assert config.records_for("rc") == 10
    assert config.records_for("ig") == 3 and config.records_for("shapley") == 10
    unlimited = BenchmarkConfig("quotesum", method_limits={"ig": 3})
    assert unlimited.records_for("ig") == 3 and unlimited.records_for("rc") is None
