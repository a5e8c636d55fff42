"""Typed model configs: one declaration per hyper-parameter, read by the model, the
CLI's flags and checks, and config.yaml."""
import dataclasses
import subprocess
import sys

import pytest
import torch

from attnlab.cli import main
from attnlab.models import CausalLM, ElementPredictor, Seq2SeqTransformer, SequenceClassifier
from attnlab.models.configs import (ARCH_PARTS, CausalLMConfig, ElementPredictorConfig,
                                    Seq2SeqConfig, SequenceClassifierConfig)
from attnlab.nn.positional import POSITIONAL_KINDS, input_kinds
from attnlab.positional_names import POSITIONAL_NAMES
from attnlab.tasks import TASKS, Runtime, get_task
from attnlab.tasks.lm import runtime as lm_task
from attnlab.tokenizers import TOKENIZER_KINDS

CASES = [
    (CausalLM, CausalLMConfig(vocab_size=30, model_dim=16, num_heads=2, num_layers=1,
                              max_len=12, positional="rope", attention_dropout=0.1)),
    (SequenceClassifier, SequenceClassifierConfig(num_classes=3, vocab_size=40, model_dim=16,
                                                  num_heads=2, pooling="mean")),
    (Seq2SeqTransformer, Seq2SeqConfig(src_vocab_size=20, tgt_vocab_size=25, model_dim=16,
                                       num_heads=2, num_decoder_layers=1)),
    (ElementPredictor, ElementPredictorConfig(input_dim=10, num_classes=10, model_dim=16)),
]


@pytest.mark.parametrize("cls, config", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_from_config_builds_the_model_its_config_describes(cls, config):
    model = cls.from_config(config)
    assert model.config == config
    again = cls.from_config(type(config).from_dict(config.as_dict()))  # config.yaml round trip
    assert again.state_dict().keys() == model.state_dict().keys()
    assert all(a.shape == b.shape for a, b in zip(again.state_dict().values(),
                                                   model.state_dict().values()))


def test_model_config_is_still_read_like_a_dict():
    lm = CausalLM(50, model_dim=16, num_heads=2, num_layers=1)
    assert lm.config["dim_feedforward"] == 64 == lm.config.dim_feedforward  # derived: 4·D
    assert dict(lm.config)["tie_weights"] is True and "positional" in lm.config
    with pytest.raises(KeyError):
        lm.config["block_size"]


def test_config_of_a_run_written_before_takes_defaults_for_new_keys():
    old = {"vocab_size": 40, "block_size": 16, "model_dim": 16, "num_heads": 2, "num_layers": 1,
           "dim_feedforward": 32, "dropout": 0.1, "norm_first": True, "positional": "learned",
           "activation": "gelu", "tie_weights": True, "data": "x.txt", "task": "lm"}
    cfg = lm_task.model_config_of(get_task("lm").read_config(old, "config.yaml"))
    assert cfg.max_len == 16 and cfg.attention_dropout == 0.0 and cfg.dim_feedforward == 32


@pytest.mark.slow
def test_attention_dropout_reaches_the_model_from_the_command_line(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 40)
    out = tmp_path / "run"
    assert main(["train", "lm", "--data", str(text), "--out", str(out), "--max-steps", "1",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--block-size", "8", "--batch-size", "4",
                 "--val-batches", "1", "--warmup", "1", "--attention-dropout", "0.25"]) == 0
    import attnlab
    import yaml

    assert yaml.safe_load((out / "config.yaml").read_text())["attention_dropout"] == 0.25
    model, _ = attnlab.load(out)
    assert model.config.attention_dropout == 0.25
    assert model.decoder.layers[0].self_attn.dropout == 0.25  # the attention's own dropout


@pytest.mark.parametrize("argv, message", [
    (["--attention-dropout", "1.5"], "--attention-dropout must be in [0, 1), got 1.5"),
    (["--positional", "xpos"], "invalid choice: 'xpos'"),
])
def test_a_bad_model_flag_is_refused_naming_it(tmp_path, capsys, argv, message):
    text = tmp_path / "t.txt"
    text.write_text("abc " * 50)
    assert main(["train", "lm", "--data", str(text), "--out", str(tmp_path / "r"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_model_flags_show_their_defaults_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["train", "lm", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--attention-dropout F dropout on the attention weights (default: as --dropout)" in help_text
    assert "--weight-decay F AdamW weight decay" in help_text and "(default: 0.1)" in help_text
    assert "position encoding (default: learned)" in help_text


def test_positional_choices_come_from_one_registry():
    assert tuple(POSITIONAL_KINDS) == tuple(POSITIONAL_NAMES)
    field = {f.name: f for f in dataclasses.fields(CausalLMConfig)}["positional"]
    assert field.metadata["choices"] == tuple(POSITIONAL_NAMES)
    field = {f.name: f for f in dataclasses.fields(SequenceClassifierConfig)}["positional"]
    assert field.metadata["choices"] == input_kinds()


def test_configs_import_no_torch():
    code = ("import sys, attnlab.models.configs, attnlab.positional_names, attnlab.settings;"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_task_module_exposes_tasks_and_a_build_model():
    """The spec module registers the task; its runtime module builds the model."""
    from importlib import import_module

    for name, task in TASKS.items():
        package = import_module(type(task).__module__.rpartition(".")[0])  # tasks/NAME/
        assert package.TASKS[name] is get_task(name) is task
        assert callable(task.runtime().build_model)
        assert isinstance(task.runtime(), Runtime)  # run, load, predict_many, ...


def test_one_tokenizer_registry():
    from attnlab.tasks.classify import spec as classify
    from attnlab.tasks.translate import spec as translate

    assert tuple(TOKENIZER_KINDS) == ("char", "word", "bpe")
    assert translate.TOKENIZERS == ("auto", *TOKENIZER_KINDS)
    assert not hasattr(classify, "TOKENIZERS")


def test_arch_sets_the_parts_left_out_in_python_and_refuses_one_that_disagrees():
    """``CausalLMConfig(arch="llama")`` is the model ``--arch llama`` builds: the four parts
    filled in, the same weights' shapes and outputs as naming them; a part named with another
    value (even the field's default) is refused, not silently replaced."""
    named = dict(positional="rope", norm="rms", ff="swiglu", bias=False)
    short = CausalLMConfig(vocab_size=40, model_dim=16, num_heads=4, num_kv_heads=2, arch="llama")
    assert short == CausalLMConfig(vocab_size=40, model_dim=16, num_heads=4, num_kv_heads=2,
                                   arch="llama", **named)
    torch.manual_seed(0)
    a = CausalLM(short).eval()
    b = CausalLM(40, model_dim=16, num_heads=4, num_kv_heads=2, **named).eval()
    b.load_state_dict(a.state_dict())  # strict: the same parameters by name and shape
    x = torch.randint(0, 40, (2, 7))
    torch.testing.assert_close(a(x), b(x), atol=0, rtol=0)
    for part in named:  # each of GPT-2's values, given by hand, disagrees with llama's
        with pytest.raises(ValueError, match=f"{part} .* disagrees with arch llama"):
            CausalLMConfig(vocab_size=40, arch="llama",
                           **{part: ARCH_PARTS["gpt2"][part]})


@pytest.mark.parametrize("settings", [
    {},  # GPT-2's block, learned positions, tied
    {"arch": "llama", "num_kv_heads": 2, "head_dim": 32, "tie_weights": False},  # wide heads
    {"arch": "llama", "num_kv_heads": 1, "dim_feedforward": 96},  # multi-query, gated
])
def test_the_lm_memory_estimate_counts_the_parameters_the_model_has(settings):
    """``attnlab train lm`` refuses settings the machine cannot hold from this count, so it
    must follow --head-dim, --num-kv-heads and a gated --ff (it once counted 4·D² per block
    for attention whatever the heads' width). Norm weights and biases are left out: a few
    thousandths of the model."""
    cfg = {"vocab_size": 90, "model_dim": 32, "num_heads": 4, "num_layers": 2, "max_len": 48,
           **settings}
    model_cfg = CausalLMConfig(**cfg)
    # on the CPU: weights in a GPU's memory are not counted against this machine's
    found = get_task("lm").memory_estimate({**model_cfg.as_dict(), "accelerator": "cpu"})
    has = sum(p.numel() for p in CausalLM(model_cfg).parameters())
    assert 0.97 * has <= sum(size for _, size in found) / 16 <= has
