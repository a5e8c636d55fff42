"""``--freeze`` and ``--lora-rank`` (``attnlab.nn.lora``, ``attnlab.training.adapt``): what is
frozen keeps its weights bit for bit, LoRA trains only its update and, merged, computes what
the adapted model computed; the run saves an ordinary model."""
import copy

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.models import CausalLM
from attnlab.nn import LoRALinear, add_lora, merge_lora

TEXT = "the quick brown fox jumps over the lazy dog. " * 40
TINY = ["--max-steps", "4", "--warmup", "1", "--model-dim", "16", "--num-heads", "2",
        "--num-layers", "2", "--dim-feedforward", "32", "--batch-size", "8", "--threads", "1",
        "--lr", "1e-2"]


def test_lora_linear_is_its_base_until_trained_and_merges_to_the_same_function():
    torch.manual_seed(0)
    base = nn.Linear(12, 6)
    layer = LoRALinear(copy.deepcopy(base), rank=3, alpha=6.0)
    x = torch.randn(5, 12)
    assert torch.equal(layer(x), base(x))  # B starts at zero
    with torch.no_grad():
        layer.lora_B.normal_()
    expected = x @ (base.weight + 2.0 * layer.lora_B @ layer.lora_A).T + base.bias  # α/r = 2
    assert_close(layer(x), expected, atol=1e-6, rtol=1e-6)
    merged = layer.merged()
    assert type(merged) is nn.Linear
    assert_close(merged(x), layer(x), atol=1e-6, rtol=1e-6)
    for rank in (0, 7):
        with pytest.raises(ValueError, match=r"rank must be in \[1, 6\]"):
            LoRALinear(nn.Linear(12, 6), rank=rank, alpha=1.0)


@pytest.mark.slow
def test_lora_trains_only_its_update_and_the_merged_model_computes_the_same():
    torch.manual_seed(0)
    model = CausalLM(30, model_dim=16, num_heads=2, num_layers=2, max_len=16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    wrapped = add_lora(model, rank=2, alpha=4.0)
    assert len(wrapped) == 4  # qkv_proj and o_proj of each block
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2,
                                  weight_decay=0.1)
    ids = torch.randint(0, 30, (4, 16))
    for _ in range(5):
        model(ids).logsumexp(-1).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    trained = {k.replace(".base.", "."): v for k, v in model.state_dict().items()
               if "lora_" not in k}
    assert trained.keys() == before.keys()
    assert all(torch.equal(trained[k], before[k]) for k in before)  # only A and B moved
    assert any(not torch.equal(p, torch.zeros_like(p)) for n, p in model.named_parameters()
               if n.endswith("lora_B"))
    model.eval()
    with torch.no_grad():
        adapted = model(ids)
        assert merge_lora(model) == 4
        assert not any(isinstance(m, LoRALinear) for m in model.modules())
        assert model.state_dict().keys() == before.keys()
        assert_close(model(ids), adapted, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch, targets, layers", [
    ("gpt2", "mlp", ["linear_net.0", "linear_net.3"]),  # GPT-2's fc and proj
    ("llama", "mlp", ["linear_net.gate_proj", "linear_net.up_proj", "linear_net.down_proj"]),
    ("llama", "attention", ["self_attn.qkv_proj", "self_attn.o_proj"]),
    ("llama", "all-linear", ["self_attn.qkv_proj", "self_attn.o_proj", "linear_net.gate_proj",
                             "linear_net.up_proj", "linear_net.down_proj"]),
])
def test_lora_targets_adapt_the_layers_they_name_and_merge_to_the_same_function(
        arch, targets, layers):
    torch.manual_seed(0)
    parts = {"gpt2": {}, "llama": dict(norm="rms", ff="swiglu", positional="rope", bias=False)}
    model = CausalLM(30, model_dim=16, num_heads=2, num_layers=2, max_len=16, **parts[arch])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.randint(0, 30, (2, 16))
    with torch.no_grad():
        plain = model.eval()(ids)
    wrapped = add_lora(model, rank=2, alpha=4.0, targets=targets)
    assert wrapped == [f"decoder.layers.{i}.{name}" for i in range(2) for name in layers]
    trains = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trains == {f"{w}.lora_{ab}" for w in wrapped for ab in "AB"}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("lora_B"):
                p.normal_()  # an update that changes the model
    with torch.no_grad():
        adapted = model(ids)
        assert not torch.allclose(adapted, plain)  # the update reaches the output
        base = {k.replace(".base.", "."): v for k, v in model.state_dict().items()
                if "lora_" not in k}
        assert all(torch.equal(base[k], before[k]) for k in before)  # the base weights stay
        assert merge_lora(model) == len(wrapped)
        assert_close(model(ids), adapted, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="targets must be one of"):
        add_lora(model, 2, 2.0, targets="mlps")


class _Snapshot:
    """A probe (``loop_probe``) keeping the model's weights as training starts."""

    def __init__(self):
        self.weights = None

    def on_train_batch_start(self, loop, batch):
        if self.weights is None:
            self.weights = {k.replace(".base.", "."): v.detach().clone()
                            for k, v in loop.module.model.state_dict().items()
                            if "lora_" not in k}


def _train_watched(monkeypatch, argv):
    from .loop_probe import probe_loop

    snapshot = _Snapshot()
    probe_loop(monkeypatch, snapshot)
    assert main(argv) == 0
    return snapshot.weights


@pytest.mark.slow
@pytest.mark.parametrize("flags, moved", [
    (["--lora-rank", "2"], lambda k: ".self_attn." in k and k.endswith("weight")),
    (["--freeze", "all-but-last-1"],
     lambda k: k.startswith(("decoder.layers.1.", "decoder.norm.", "token_embedding.",
                             "lm_head."))),
])
def test_an_lm_run_trains_what_the_flags_say_and_saves_an_ordinary_model(
        tmp_path, monkeypatch, capsys, flags, moved):
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "run"
    start = _train_watched(monkeypatch, ["train", "lm", "--data", str(tmp_path / "text.txt"),
                                         "--out", str(out), "--block-size", "16", *TINY, *flags])
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if line.startswith("note: --"))
    model, _ = attnlab.load(out)  # an ordinary CausalLM: its state dict loads as any other's
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    final = model.state_dict()
    assert final.keys() == start.keys()
    changed = {k for k in final if not torch.equal(final[k], start[k])}
    # the tied head is the token embedding: it trains with the last block
    assert changed and all(moved(k) for k in changed), sorted(changed)
    # lm_head.weight is token_embedding.weight: counted once
    trainable = sum(start[k].numel() for k in start if moved(k) and not k.startswith("lm_head."))
    if flags[0] == "--freeze":
        assert f"training {trainable:,} parameters; the model has" in note
    else:  # A (2 x 16) and B (48 x 2 or 16 x 2) of 2 projections in 2 blocks
        assert note.startswith("note: --lora-rank 2 (alpha 2) on 4 attention projections: "
                               "training 384 parameters; the model has ")
        # no Hugging Face base for peft to load an adapter onto: said, and none written
        assert ("note: no adapter/ for this --lora-rank run: started from random weights"
                in err)
        assert not (out / "adapter").exists()
    import json
    parameters = json.loads((out / "metrics.json").read_text())["parameters"]
    assert note.endswith(f"the model has {parameters:,}")


@pytest.mark.parametrize("task, flags, message", [
    ("lm", ["--lora-rank", "17"], "--lora-rank 17 is above the model width (--model-dim 16)"),
    ("lm", ["--lora-alpha", "4"], "--lora-alpha scales a LoRA update: give --lora-rank too"),
    ("lm", ["--lora-targets", "mlp"], "--lora-targets mlp names the layers of a LoRA update: "
                                      "give --lora-rank too"),
    ("lm", ["--lora-rank", "2", "--lora-targets", "ffn"], "--lora-targets"),
    ("lm", ["--freeze", "encoder"], "--freeze encoder: this model has no encoder"),
    ("lm", ["--freeze", "all-but-last-3"], "--freeze all-but-last-3: the model has 2 blocks"),
    ("lm", ["--freeze", "last-2"], "--freeze must be none, encoder or all-but-last-N"),
    ("lm", ["--freeze", "all-but-last-1", "--lora-rank", "2"],
     "--freeze all-but-last-1 with --lora-rank: LoRA trains only its update"),
    ("translate", ["--arch", "rnn", "--lora-rank", "2"],
     "--lora-rank adapts attention projections; this model has none"),
    # a target set that matches no layer of the model: a GRU translator has no blocks
    ("translate", ["--arch", "rnn", "--lora-rank", "2", "--lora-targets", "mlp"],
     "--lora-rank adapts feed-forward layers (--lora-targets mlp); this model has none"),
    # --lora-targets without --lora-rank, on every task that takes them
    ("translate", ["--lora-targets", "all-linear"], "--lora-targets all-linear names the layers "
                                                    "of a LoRA update: give --lora-rank too"),
    ("classify", ["--lora-targets", "mlp"], "--lora-targets mlp names the layers of a LoRA "
                                            "update: give --lora-rank too"),
    ("translate", ["--arch", "rnn", "--freeze", "encoder"], "--freeze is for --arch transformer"),
])
def test_bad_adaptation_flags_are_one_line_before_the_run_directory(tmp_path, capsys, task,
                                                                     flags, message):
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "labels.csv").write_text("text,label\n" + "".join(
        f"text {i},{'ab'[i % 2]}\n" for i in range(20)), encoding="utf-8")
    data = {"lm": ["--data", str(tmp_path / "text.txt")],
            "classify": ["--data", str(tmp_path / "labels.csv")]}.get(task, [])
    sizes = ["--model-dim", "16", "--num-layers", "2"]
    sizes += ["--num-heads", "2"] if "rnn" not in flags else []
    assert main(["train", task, *data, "--out", str(tmp_path / "run"), *sizes, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_translate_freeze_encoder_keeps_the_source_side(tmp_path, monkeypatch):
    out = tmp_path / "run"
    start = _train_watched(monkeypatch, ["train", "translate", "--out", str(out), *TINY,
                                         "--freeze", "encoder", "--no-tie-embeddings"])
    model, _ = attnlab.load(out)
    final = model.state_dict()
    source = [k for k in final if k.startswith(("src_embedding.", "transformer.encoder."))]
    assert source and all(torch.equal(final[k], start[k]) for k in source)
    assert any(not torch.equal(final[k], start[k]) for k in final
               if k.startswith("transformer.decoder."))


@pytest.mark.slow
@pytest.mark.parametrize("targets, adapted", [("attention", ".self_attn."),
                                              ("mlp", ".linear_net.")])
def test_classify_lora_trains_the_update_and_the_new_head(tmp_path, monkeypatch, targets,
                                                         adapted):
    rows = ["text,label"] + [f"{w} is {'good' if i % 2 else 'bad'},{'pos' if i % 2 else 'neg'}"
                             for i, w in enumerate(["this", "that", "it", "one"] * 20)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    start = _train_watched(monkeypatch, ["train", "classify", "--data", str(tmp_path / "data.csv"),
                                         "--out", str(out), *TINY, "--lora-rank", "2",
                                         "--lora-targets", targets])
    model, _ = attnlab.load(out)
    final = model.state_dict()
    changed = {k for k in final if not torch.equal(final[k], start[k])}
    assert any(k.startswith("output_net.") for k in changed)
    assert any(adapted in k for k in changed)
    assert all(k.startswith("output_net.") or adapted in k for k in changed), changed


@pytest.mark.slow
@pytest.mark.parametrize("flags, frozen", [
    (["--freeze", "all-but-last-1"],
     lambda k: k.startswith(("decoder.layers.0.", "positional_encoding."))),
    (["--lora-rank", "2"], lambda k: ".self_attn." not in k or k.endswith("bias")),
], ids=["freeze", "lora"])
@pytest.mark.parametrize("resumed", [False, True], ids=["whole", "resumed"])
def test_frozen_weights_are_saved_bit_for_bit_after_a_bf16_true_run(tmp_path, flags, frozen,
                                                                    resumed):
    """--precision bf16-true trains the weights in bfloat16: the frozen ones are the
    --init model's all the same in model.safetensors, not rounded to bfloat16's 8 bits; also
    after --resume, which builds the model anew from the checkpoint (its frozen weights
    bfloat16's), not from --init."""
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    base, out = tmp_path / "base", tmp_path / "run"
    data = ["--data", str(tmp_path / "text.txt"), "--block-size", "16", *TINY]
    assert main(["train", "lm", *data, "--out", str(base), "--precision", "32"]) == 0
    run = ["train", "lm", *data, "--out", str(out), "--precision", "bf16-true", *flags]
    if resumed:  # the first 2 of the 4 steps, then the rest
        assert main([*run, "--init", str(base), "--max-steps", "2"]) == 0
        assert main([*run, "--resume"]) == 0
    else:
        assert main([*run, "--init", str(base)]) == 0
    start, final = attnlab.load(base)[0].state_dict(), attnlab.load(out)[0].state_dict()
    kept = [k for k in final if frozen(k)]
    # bfloat16 would round these
    assert len(kept) > 5 and any(not torch.equal(start[k], start[k].bfloat16().float())
                                 for k in kept)
    assert [k for k in kept if not torch.equal(final[k], start[k])] == []
    assert any(not torch.equal(final[k], start[k]) for k in final if not frozen(k))
