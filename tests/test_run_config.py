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
    from attnlab.interop.source import BERT_FAMILY
    from tests.reliability.test_load_after_train import CASES as TRAINED

    assert {*TRAINED, *(f"classify-{arch}" for arch in BERT_FAMILY)} <= set(CASES)


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


@pytest.mark.parametrize("case", CASES)
def test_a_run_written_before_builds_the_model_it_trained(case, tmp_path):
    """``attnlab.load`` builds the model from config.yaml before it reads the weights: each
    fixture's model is built, as wide as the run recorded."""
    import torch

    values = read_yaml(FIXTURES / f"{case}.yaml")
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    model = get_task(values["task"]).runtime().build_model(cfg)
    assert isinstance(model, torch.nn.Module)
    assert values["model_dim"] in {n for p in model.parameters() for n in p.shape}


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
    """A setting the model and the command line both see is one field of one part of the run
    config, read through that part or by its name alone."""
    cfg = get_task("lm").config(model_dim=32, block_size=16, lr=0.01)
    assert isinstance(cfg, RunSettings)
    assert (cfg.model.model_dim, cfg.settings.block_size, cfg.train.lr) == (32, 16, 0.01)
    assert (cfg.model_dim, cfg.block_size, cfg.lr) == (32, 16, 0.01)
    owner = type(cfg).layout.owner
    assert (owner["model_dim"], owner["vocab_size"], owner["block_size"], owner["lr"],
            owner["corpus_sha256"], owner["out"]) == (
        "model", "model", "settings", "train", "derived", "run")


# ---- a setting a run lacks: what the run used, or an error naming the file ----------------

def test_a_run_made_before_a_setting_existed_reads_the_value_it_trained_with(tmp_path):
    """``weight_decay``, ``beta2``, ``--freeze``, ``--lora-rank`` came after runs were made:
    such a run's config reads what it trained with (no decay, PyTorch's 0.999, everything
    trained), and writes back without them."""
    values = read_yaml(FIXTURES / "lm.yaml")
    for key in ("weight_decay", "beta2", "freeze", "lora_rank", "lora_alpha"):
        del values[key]
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    assert (cfg.weight_decay, cfg.beta2, cfg.freeze, cfg.lora_rank, cfg.lora_alpha) == (
        0.0, 0.999, "none", None, None)
    assert not cfg.is_set("weight_decay")
    write_config(tmp_path, cfg)
    assert read_yaml(tmp_path / "config.yaml") == values  # nothing added to the record

    import torch

    from attnlab.training.module import make_optimizer

    opt, _ = make_optimizer([torch.nn.Parameter(torch.zeros(2, 2))], cfg, model_dim=8,
                            max_steps=10)
    assert opt.param_groups[0]["weight_decay"] == 0.0
    assert opt.param_groups[0]["betas"] == (0.9, 0.999)


def test_a_translate_run_made_before_its_later_settings_reads_what_it_used(tmp_path):
    """--arch, --dataset, --data, --test, --beam and --length-penalty came after translate runs
    were made (and a run on the built-in data leaves --test out): such a run is a Transformer
    on the built-in numbers, tested greedily; its model is built and its digits spelled so,
    and it writes back without them."""
    from attnlab.models import Seq2SeqTransformer
    from attnlab.tasks.translate.data import spell_digits
    from attnlab.tasks.translate.runtime import build_model

    values = read_yaml(FIXTURES / "translate-transformer.yaml")
    for key in ("arch", "dataset", "data", "test", "beam", "length_penalty", "data_sha256"):
        values.pop(key, None)
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    assert (cfg.arch, cfg.dataset, cfg.data, cfg.test, cfg.beam, cfg.length_penalty,
            cfg.data_sha256) == ("transformer", "numbers", None, None, 1, 1.0, None)
    assert isinstance(build_model(cfg), Seq2SeqTransformer)
    assert spell_digits(cfg, ["42"]) == ["forty-two"]
    write_config(tmp_path, cfg)
    assert read_yaml(tmp_path / "config.yaml") == values


def test_a_model_setting_every_run_records_is_named_when_missing(tmp_path):
    """The model is built from the run's settings by attribute: a config.yaml without one that
    every run writes (``num_layers``) is refused naming it, not built with a default."""
    from attnlab.tasks.translate.runtime import build_model

    values = read_yaml(FIXTURES / "translate-transformer.yaml")
    del values["num_layers"]
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    with pytest.raises(UsageError, match=r"config.yaml has no setting 'num_layers', which this "
                                         r"command needs"):
        build_model(cfg)


def test_a_setting_with_no_declared_past_is_still_named_when_missing(tmp_path):
    values = read_yaml(FIXTURES / "lm.yaml")
    del values["lr"]
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    with pytest.raises(UsageError, match=r"config.yaml has no setting 'lr', which this command "
                                         r"needs"):
        cfg.lr


def test_the_optimiser_reads_a_run_config_and_the_course_dict_alike():
    from attnlab.training.module import OptimizerSettings

    cfg = get_task("lm").config(lr=0.01, warmup=7, weight_decay=0.1, beta2=0.99, model_dim=32)
    assert OptimizerSettings.of(cfg) == OptimizerSettings.of(
        {"lr": 0.01, "warmup": 7, "weight_decay": 0.1, "beta2": 0.99, "schedule": "cosine",
         "model_dim": 32})


# ---- mapping reads of the typed config: for users, not for attnlab's own code -------------

def test_an_attnlab_module_reading_the_config_as_a_mapping_fails_and_a_user_may():
    cfg = get_task("reverse").config()
    for module in ("attnlab.training.engine", "attnlab.tasks.classify.runtime",
                   "attnlab.commands.train"):
        for read in ("cfg['lr']", "cfg.get('lr')", "'lr' in cfg", "cfg.items()"):
            with pytest.raises(AssertionError, match=f"^{module} reads the typed run config as "
                                                     f"a mapping"):
                exec(read, {"__name__": module, "cfg": cfg})  # noqa: S102
    assert exec("value = cfg['lr']", scope := {"__name__": "__main__", "cfg": cfg}) is None  # noqa: S102
    assert scope["value"] == cfg.lr


def test_an_lm_run_made_before_ff_dropout_keeps_dropout_inside_its_feed_forward(tmp_path):
    """``--ff-dropout`` came after lm runs were made, which had --dropout inside each
    feed-forward network (the course's block); a new run has none there (GPT-2's)."""
    from attnlab.tasks.lm.runtime import build_model

    values = read_yaml(FIXTURES / "lm.yaml")
    assert "ff_dropout" not in values and values["dropout"] == 0.1
    _, cfg = check_run_dir(_run_dir(tmp_path, values))
    assert [b.linear_net[1].p for b in build_model(cfg).decoder.layers] == [0.1]
    write_config(tmp_path, cfg)
    assert read_yaml(tmp_path / "config.yaml") == values  # nothing added to the record

    new = get_task("lm").config(**{k: v for k, v in values.items() if k != "task"})
    assert new.ff_dropout == 0.0
    assert [b.linear_net[1].p for b in build_model(new).decoder.layers] == [0.0]


def test_the_load_time_checks_read_a_missing_setting_as_the_run_trained_with_it(tmp_path):
    """A translate run from before --arch trained a Transformer (its declared ``absent``):
    loading it checks that its heads divide its width, as training did."""
    from attnlab.runs import write_yaml

    write_yaml(tmp_path / "config.yaml", {"task": "translate", "model_dim": 10, "num_heads": 4})
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UsageError, match=r"config.yaml: model_dim \(10\) must be divisible by "
                                         r"num_heads \(4\)"):
        check_run_dir(tmp_path)
    write_yaml(tmp_path / "config.yaml", {"task": "translate", "model_dim": 10, "num_heads": 4,
                                          "arch": "rnn"})
    assert check_run_dir(tmp_path)[1].model_dim == 10


@pytest.mark.parametrize("case", CASES)
def test_a_run_written_before_resumes_with_every_value_it_recorded(case, tmp_path, monkeypatch):
    """``attnlab train TASK --resume`` of each fixture goes on with the settings its
    config.yaml records, none replaced by a default of today (the data checks, which need the
    run's files, are the task tests')."""
    from attnlab.commands.train import build_config

    values = read_yaml(FIXTURES / f"{case}.yaml")
    run_dir = _run_dir(tmp_path, values)
    task = get_task(values["task"])
    monkeypatch.setattr(type(task), "validate", lambda self, cfg: None)
    cfg = build_config(values["task"], {"resume": True, "out": str(run_dir)})
    resumed = cfg.record()
    changed = {k: (v, resumed.get(k)) for k, v in values.items()  # --out: where it is now
               if k not in ("resume", "out") and resumed.get(k, "missing") != v}
    assert changed == {}
    # and a setting it lacks: what its declaration says such a run trained with
    lacking = {k: v for k, v in type(cfg).layout.absent.items() if k not in values}
    assert {k: resumed.get(k) for k in lacking} == lacking
    assert values["model_dim"] in {n for p in task.runtime().build_model(cfg).parameters()
                                   for n in p.shape}


@pytest.mark.parametrize("inside", [True, False])
def test_a_file_given_for_a_run_directory_is_named_so(tmp_path, inside):
    # `attnlab translate RUN/config.yaml TEXT` said "run directory not found" of a file that is
    # there; the message now says it is a file and, inside a run, which directory to give
    run = _run_dir(tmp_path, {}) if inside else tmp_path
    given = run / ("config.yaml" if inside else "notes.txt")
    given.touch()
    with pytest.raises(UsageError) as e:
        check_run_dir(given, command="translate")
    hint = f"; give the run directory that holds it, {run}" if inside else ""
    assert str(e.value) == f"translate: {given} is a file, not a run directory{hint}"


def test_config_yaml_shows_a_unicode_path_as_written_and_reads_it_back(tmp_path):
    """A data file `clé 日本.csv` is recorded as `data: .../clé 日本.csv` (it was
    `"...cl\\xE9 \\u65E5\\u672C.csv"`), in UTF-8 whatever the locale; a character YAML cannot
    hold as written (U+0085, a line break to YAML) is still escaped, so every value reads back
    as it was (that file is then written escaped throughout, as before)."""
    from attnlab.runs import read_yaml, write_yaml

    values = {"data": "/données/clé 日本.csv", "text_column": "text"}
    write_yaml(tmp_path / "config.yaml", values)
    assert "data: /données/clé 日本.csv\n" in (tmp_path / "config.yaml").read_text("utf-8")
    assert read_yaml(tmp_path / "config.yaml") == values
    odd = {**values, "text_column": "a\x85b"}
    write_yaml(tmp_path / "odd.yaml", odd)
    assert read_yaml(tmp_path / "odd.yaml") == odd
