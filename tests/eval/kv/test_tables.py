"""The KV benchmark's tables (rcattr.eval.kv.tables): one row per method and setting, the task's metric."""

from __future__ import annotations

from rcattr.eval.kv.tables import markdown_table, quality_metric, summary_tables
from tests.helpers import kv_summary


def test_every_method_and_setting_has_its_row() -> None:
    table = markdown_table(kv_summary())
    assert "| rc | c = 1, w = 8 |" in table and "| snapkv | ratio 0.5 |" in table
    assert "| full | — |" in table


def test_the_quality_metric_is_the_tasks_or_rouge_l_for_older_runs() -> None:
    assert quality_metric({"quality": "match"}) == "match"
    assert quality_metric({}) == "rougeL"
    lines = summary_tables(kv_summary())
    assert "| snapkv | 0.200 · 1.000 |" in lines and "| 8 | 40% · 0.200 · 1.000 |" in lines  # VER · match
    assert "### RCKVCache: compression reached · VER ↓ · ROUGE-L at each c" in summary_tables(
        kv_summary(None)
    )


def test_rckvcache_at_set_shares_has_a_grid_of_its_own() -> None:
    lines = summary_tables(kv_summary(rc_ratio=True))
    assert "### RCKVCache: compression reached · VER ↓ · answer match at each c" in lines
    assert "### RCKVCache: compression reached · VER ↓ · answer match at each set share" in lines
    assert "| window | r = 0.5 |" in lines and "| 8 | 50% · 0.200 · 1.000 |" in lines
    assert "| rc | 0.200 · 1.000 |" not in lines  # not among the presses
