"""``attnlab train lm`` with the Llama family's parts (--norm rms, --ff swiglu, --num-kv-heads,
--rope-theta, --qk-norm, --qkv-bias, --sliding-window): trained, recorded, loaded with equal
logits and resumed; the rules between them refused in one line before a run directory; export
to GPT-2 refused naming the setting; a run from before the settings builds GPT-2's block."""
import json
import re
import subprocess
import sys

import pytest
import torch
import yaml
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.models import CausalLM, CausalLMConfig
from attnlab.nn import GatedFeedForward, RMSNorm
from attnlab.tasks import get_task

TEXT = "abcabdabcabe " * 300 + "\n"
TINY = ["--max-steps", "4", "--model-dim", "32", "--num-heads", "4", "--num-layers", "1",
        "--dim-feedforward", "48", "--block-size", "16", "--batch-size", "8", "--warmup", "1",
        "--val-batches", "2", "--threads", "1", "--precision", "32"]
LLAMA = ["--positional", "rope", "--norm", "rms", "--ff", "swiglu", "--num-kv-heads", "2",
         "--rope-theta", "500000", "--no-bias", "--qkv-bias", "--qk-norm",
         "--sliding-window", "8"]


@pytest.mark.slow
def test_a_llama_style_run_trains_loads_with_equal_logits_and_resumes(tmp_path):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(out),
                 *TINY, *LLAMA]) == 0
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert {k: cfg[k] for k in ("norm", "ff", "num_kv_heads", "rope_theta", "qkv_bias",
                                "qk_norm", "sliding_window", "bias")} == {
        "norm": "rms", "ff": "swiglu", "num_kv_heads": 2, "rope_theta": 500000.0,
        "qkv_bias": True, "qk_norm": True, "sliding_window": 8, "bias": False}
    model, tokenizer = attnlab.load(out)
    block = model.decoder.layers[0]
    assert isinstance(block.norm1, RMSNorm) and isinstance(block.linear_net, GatedFeedForward)
    assert block.self_attn.num_kv_heads == 2 and block.self_attn.window == 8
    assert block.self_attn.qkv_proj.bias is not None and block.self_attn.o_proj.bias is None
    assert block.self_attn.pos_embeddings.base == 500000.0
    # the same logits as a model built from config.yaml's settings and the saved weights
    rebuilt = CausalLM(model.config).eval()
    rebuilt.load_state_dict(model.state_dict())
    ids = torch.tensor([tokenizer.encode("abcab")])
    assert_close(model(ids), rebuilt(ids), atol=0, rtol=0)
    # and the model trained: the loaded one scores the validation split as training measured
    task = get_task("lm")
    again = task.runtime().evaluate(task, out, task.typed(cfg, out), None)
    trained = json.loads((out / "metrics.json").read_text())["val_loss"]
    assert again["val_loss"] == pytest.approx(trained, abs=1e-5)
    assert torch.equal(model.generate(ids, 10), model.generate(ids, 10, use_cache=False))
    assert main(["train", "lm", "--out", str(out), "--resume", "--max-steps", "6"]) == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["num_kv_heads"] == 2
    # a config.yaml edited to break a rule between the settings: one line naming the file
    config = out / "config.yaml"
    config.write_text(config.read_text().replace("num_kv_heads: 2", "num_kv_heads: 3"))
    with pytest.raises(UsageError, match="^" + re.escape(
            f"{config}: num_heads (4) must be divisible by num_kv_heads (3)") + "$"):
        attnlab.load(out)


@pytest.mark.parametrize("args, message", [
    (["--num-kv-heads", "3"], "--num-heads (4) must be divisible by --num-kv-heads (3)"),
    (["--num-kv-heads", "0"], "--num-kv-heads must be a positive integer, got 0"),
    (["--rope-theta", "500000"],
     "--rope-theta is for --positional rope; this model has --positional learned"),
    (["--positional", "alibi", "--rope-scaling", "linear"],
     "--rope-scaling is for --positional rope; this model has --positional alibi"),
    (["--positional", "rope", "--model-dim", "12", "--num-heads", "4"],
     "--positional rope rotates pairs of channels: the head width --model-dim / --num-heads "
     "= 3 must be even"),
    (["--positional", "rope", "--head-dim", "7"],
     "--positional rope rotates pairs of channels: --head-dim (7) must be even"),
    (["--head-dim", "0"], "--head-dim must be a positive integer, got 0"),
    (["--model-dim", "30", "--num-heads", "4"], "--model-dim (30) must be divisible by "
                                                "--num-heads (4)"),
    (["--positional", "rope", "--rope-factor", "4"],
     "--rope-factor is for --rope-scaling linear or llama3"),
    (["--positional", "rope", "--rope-scaling", "linear", "--rope-original-max-len", "64"],
     "--rope-original-max-len is for --rope-scaling llama3"),
    (["--positional", "rope", "--rope-scaling", "llama3", "--rope-high-freq-factor", "1"],
     "--rope-high-freq-factor (1.0) must be above --rope-low-freq-factor (1.0)"),
    (["--norm", "batch"], "--norm"),
    (["--ff", "swiglu", "--activation", "relu"], "--activation"),
    (["--sliding-window", "0"], "--sliding-window must be a positive integer, got 0"),
    (["--rope-theta", "0"], "--rope-theta must be > 0, got 0.0"),
    (["--arch", "llama", "--norm", "layer"], "--norm: --arch llama sets --positional rope, "
                                             "--norm rms, --ff swiglu, --no-bias; drop it"),
    (["--arch", "gpt2", "--positional", "rope"], "--positional: --arch gpt2 sets --positional "
                                                 "learned, --norm layer, --ff mlp, --bias"),
    (["--arch", "llama", "--activation", "relu"], "--activation: for --ff mlp; --ff swiglu "
                                                  "gates with its own activation"),
    (["--arch", "falcon"], "--arch"),
])
def test_rules_between_the_parts_are_one_line_before_a_run_directory(args, message, tmp_path,
                                                                     capsys):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(out),
                 *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not out.exists()


def test_arch_llama_sets_its_parts_and_leaves_the_others_free(tmp_path):
    from attnlab.commands.train import build_config

    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                              "arch": "llama", "num_kv_heads": 2,
                              "bias": False, "rope_theta": 500000.0})
    model = cfg.model
    assert (model.arch, model.positional, model.norm, model.ff, model.bias) == (
        "llama", "rope", "rms", "swiglu", False)
    assert (model.num_kv_heads, model.rope_theta) == (2, 500000.0)
    with pytest.raises(ValueError, match="^norm layer disagrees with arch llama, which sets "
                                         "norm rms$"):
        CausalLMConfig(**{**dict(cfg.model), "vocab_size": 10, "norm": "layer"})


@pytest.mark.slow
def test_the_rules_refuse_before_torch_is_imported(tmp_path):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    code = ("import sys; from attnlab.cli import main; "
            f"rc = main(['train', 'lm', '--data', {str(tmp_path / 'small.txt')!r}, '--out', "
            f"{str(tmp_path / 'r')!r}, '--num-kv-heads', '3']); "
            "assert rc == 2, rc; assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--num-kv-heads (3)" in done.stderr


@pytest.mark.parametrize("fields, message", [
    (dict(num_kv_heads=3), "num_heads (4) must be divisible by num_kv_heads (3)"),
    (dict(rope_theta=5e5), "rope_theta is for positional rope; this model has positional "
                           "learned"),
    (dict(positional="rope", model_dim=20, num_heads=4),
     "positional rope rotates pairs of channels: the head width model_dim / num_heads = 5 "
     "must be even"),
])
def test_the_config_checks_the_same_rules(fields, message):
    """What attnlab.load builds a run's model from (its config.yaml's values) is refused by the
    same rules, naming the fields."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        CausalLMConfig(vocab_size=10, **fields)


@pytest.mark.parametrize("fields, setting", [
    (dict(norm="rms"), "norm"), (dict(ff="swiglu"), "ff"), (dict(num_kv_heads=2), "num_kv_heads"),
    (dict(qk_norm=True), "qk_norm"), (dict(sliding_window=4), "sliding_window"),
    (dict(qkv_bias=False), "qkv_bias"),
])
def test_export_to_gpt2_refuses_the_llama_parts_naming_them(fields, setting):
    from attnlab.interop import to_hf

    model = CausalLM(CausalLMConfig(vocab_size=20, model_dim=16, num_heads=4, num_layers=1,
                                    max_len=16, **fields))
    with pytest.raises(ValueError, match=f"GPT-2 needs {setting}=.*this CausalLM has {setting}="):
        to_hf(model)


def test_a_config_from_before_the_parts_builds_gpt2s_block():
    """A config.yaml without the new keys (every run before them) builds exactly the model it
    trained: the same parameter names and shapes as GPT-2's block."""
    old = CausalLMConfig.from_dict({"vocab_size": 30, "model_dim": 16, "num_heads": 2,
                                    "num_layers": 1, "max_len": 16})
    model = CausalLM(old)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["decoder.layers.0.self_attn.qkv_proj.weight"] == (48, 16)
    assert shapes["decoder.layers.0.linear_net.0.weight"] == (64, 16)
    assert "decoder.layers.0.norm1.bias" in shapes and "decoder.norm.bias" in shapes
    assert (old.norm, old.ff, old.num_kv_heads, old.qk_norm, old.sliding_window) == (
        "layer", "mlp", None, False, None)


@pytest.mark.slow
def test_init_from_a_run_made_before_the_parts_keeps_gpt2s_block(tmp_path, capsys):
    """--init of an lm run whose config.yaml predates the parts: its model is GPT-2's block,
    so a part flag that disagrees is refused (its weights would not fit), naming both."""
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    old = tmp_path / "old"
    assert main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(old),
                 *TINY]) == 0
    cfg = yaml.safe_load((old / "config.yaml").read_text())
    new_keys = [f for f in CausalLMConfig.__dataclass_fields__ if f in cfg
                and (f.startswith("rope_") or f in ("norm", "ff", "num_kv_heads", "qkv_bias",
                                                    "qk_norm", "sliding_window"))]
    assert len(new_keys) == 12 and "arch" in cfg
    new_keys.append("arch")
    (old / "config.yaml").write_text(yaml.safe_dump({k: v for k, v in cfg.items()
                                                     if k not in new_keys}))
    capsys.readouterr()
    out = tmp_path / "again"
    assert main(["train", "lm", "--init", str(old), "--data", str(tmp_path / "small.txt"),
                 "--out", str(out), *TINY, "--norm", "rms"]) == 2
    err = capsys.readouterr().err
    assert "--norm rms: --init" in err and "has norm layer" in err and err.count("\n") == 1
    assert not out.exists()
    assert main(["train", "lm", "--init", str(old), "--data", str(tmp_path / "small.txt"),
                 "--out", str(out), *TINY]) == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["norm"] == "layer"


def test_head_dim_gives_the_heads_a_width_of_their_own(tmp_path):
    """--head-dim: the heads need not divide --model-dim; the model's projections are H·hd
    wide; config.yaml records it and a config without the key reads None (D / H)."""
    from attnlab.commands.train import build_config

    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                              "arch": "llama", "model_dim": 30, "num_heads": 4,
                              "num_kv_heads": 2, "head_dim": 8})
    assert cfg.model.head_dim == 8 and cfg.record()["head_dim"] == 8
    model = CausalLM(CausalLMConfig(**{**dict(cfg.model), "vocab_size": 10})).eval()
    attn = model.decoder.layers[0].self_attn
    assert (attn.head_dim, attn.qkv_proj.weight.shape, attn.o_proj.weight.shape) == (
        8, (4 * 8 + 2 * 2 * 8, 30), (30, 32))
    ids = torch.randint(0, 10, (1, 5))
    assert torch.equal(model.generate(ids, 8), model.generate(ids, 8, use_cache=False))
    assert CausalLMConfig.from_dict({"vocab_size": 10}).head_dim is None
    with pytest.raises(ValueError, match="model_dim .30. must be divisible by num_heads .4."):
        CausalLM(10, model_dim=30, num_heads=4)
