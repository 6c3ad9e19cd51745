"""The benchmarks' shared run arguments (rcattr.eval.common.run_args): where the model is loaded."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from rcattr.eval.common.run_args import load_run_model
from rcattr.eval.common.sharding import Processes, Shard


def test_the_model_goes_to_the_process_device_or_is_spread_by_device_map(monkeypatch) -> None:
    loads = []
    monkeypatch.setattr("rcattr.runtime.models.load_model", lambda name, **placement: loads.append(placement))
    alone = Processes.start()
    assert alone.count == 1 and alone.is_main and alone.shard == Shard()
    load_run_model("some/model", None, alone)
    load_run_model("some/model", "auto", alone)
    assert loads == [{"device": alone.device}, {"device_map": "auto"}]
    several = replace(alone, _state=SimpleNamespace(num_processes=2))
    with pytest.raises(SystemExit, match="2 processes"):
        load_run_model("some/model", "auto", several)
