"""The typed run config: runs written before it load into it with their values (the fixtures
are config.yaml files of tiny runs that attnlab wrote before the config was typed); derived
values are set only through ``derive``; ``write_config`` writes back what was read."""
from pathlib import Path

import pytest
import yaml

from attnlab.errors import UsageError
from attnlab.loading import check_run_dir
from attnlab.run_config import RunSettings
from attnlab.runs import read_yaml, write_config
from attnlab.tasks import get_task

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
CASES = sorted(p.stem for p in FIXTURES.glob("*.yaml"))


def _run_dir(tmp_path, values: dict) -> Path:
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(values))
    (tmp_path / "model.safetensors").write_bytes(b"")
    return tmp_path


def test_every_task_and_arch_has_a_fixture():
    assert {"reverse", "anomaly", "classify", "translate-transformer", "translate-rnn", "lm",
            "jets", "graph-gat"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_a_run_written_before_the_typed_config_loads_into_it(case, tmp_path):
    values = read_yaml(FIXTURES / f"{case}.yaml")
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    assert isinstance(cfg, get_task(values["task"]).config_class())
    assert cfg.record() == values  # nothing lost, nothing added
    for key, value in values.items():
        assert getattr(cfg, key) == value, key
    write_config(tmp_path, cfg)  # written back: the same keys and values
    assert read_yaml(tmp_path / "config.yaml") == values


def test_a_key_no_setting_declares_is_kept_and_a_missing_one_named(tmp_path):
    values = {**read_yaml(FIXTURES / "reverse.yaml"), "a_setting_of_long_ago": 3}
    del values["seq_len"]
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    assert cfg.record()["a_setting_of_long_ago"] == 3
    assert not cfg.is_set("seq_len")
    with pytest.raises(UsageError, match=r"config.yaml has no setting 'seq_len'"):
        cfg.seq_len


def test_derive_sets_the_declared_derived_values_only():
    cfg = get_task("lm").config(model_dim=32, dropout=0.1)
    assert (cfg.model_dim, cfg.block_size, cfg.is_set("corpus_sha256")) == (32, 128, False)
    derived = cfg.derive(vocab_size=50, precision="bf16-mixed", corpus_sha256={"a": "b"})
    assert (derived.vocab_size, derived.precision, derived.corpus_sha256) == (
        50, "bf16-mixed", {"a": "b"})
    with pytest.raises(ValueError, match="model_dim is not a derived value"):
        cfg.derive(model_dim=64)
    with pytest.raises(AttributeError):  # frozen
        cfg.model_dim = 64  # type: ignore[misc]


def test_one_field_per_declaration():
    """A setting the model and the command line both see is one field of the run config."""
    cls = get_task("lm").config_class()
    assert issubclass(cls, RunSettings)
    names = [f.name for f in __import__("dataclasses").fields(cls)]
    assert len(names) == len(set(names))
    assert {"model_dim", "attention_dropout", "block_size", "vocab_size", "corpus_sha256",
            "task", "out"} <= set(names)
