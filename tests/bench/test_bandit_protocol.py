"""The bandit's protocol: one frozen configuration, and a version that every record carries."""

import json
from pathlib import Path

import pytest
import torch

from bnnkit.bench import bandit
from bnnkit.core.errors import BnnkitError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "mushroom" / "agaricus-lepiota.data").exists(), reason="needs ../shared/data/mushroom"
)


def test_the_configuration_is_frozen_and_a_run_gets_a_plain_copy():
    with pytest.raises(TypeError):
        bandit.DEFAULTS["noise"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        bandit.DEFAULTS["prior_scales"]["default"] = 1.0  # type: ignore[index]
    cfg = bandit.plain_config(quick=True, overrides={"noise": 0.3})
    assert cfg["hidden"] == bandit.QUICK["hidden"] and cfg["noise"] == 0.3
    assert json.loads(json.dumps(cfg)) == cfg  # JSON-able, as the records hold it
    cfg["prior_scales"]["default"] = 1.0  # a copy: the protocol is untouched
    assert bandit.DEFAULTS["prior_scales"]["default"] == 0.1


def test_a_record_of_another_protocol_version_is_never_this_run():
    base = bandit.plain_config()
    record = {"method": "sgld", "pattern": 0.5, "seed": 0, "steps": 10, "config": base}
    assert bandit.same_run(record, "sgld", 0.5, 0, 10, base, base)  # no version: version 1
    assert bandit.same_run(dict(record, protocol=bandit.PROTOCOL), "sgld", 0.5, 0, 10, base, base)
    other = dict(record, protocol=bandit.PROTOCOL + 1)
    assert not bandit.same_run(other, "sgld", 0.5, 0, 10, base, base)
    assert "protocol" not in bandit.public_record(dict(record, protocol=1))


@needs_data
def test_records_carry_the_version_and_a_rebuild_skips_other_versions(tmp_path):
    torch.set_num_threads(1)
    args = dict(methods=("greedy0",), patterns=(0.5,), seeds=(0,), steps=30, quick=True, root=str(DATA))
    first = bandit.run_bandit(out=tmp_path / "a", progress=False, log=lambda _: None, **args)
    record = json.loads((tmp_path / "a" / bandit.RUNS_FILE).read_text())
    assert record["protocol"] == bandit.PROTOCOL
    assert "protocol" not in first["runs"][0]  # the run in the report: the report has the protocol
    (tmp_path / "v2.jsonl").write_text(json.dumps(dict(record, protocol=bandit.PROTOCOL + 1)) + "\n")
    with pytest.raises(BnnkitError, match="holds no run"):
        bandit.run_bandit(
            out=tmp_path / "b", from_runs=tmp_path / "v2.jsonl", progress=False, log=lambda _: None, **args
        )
