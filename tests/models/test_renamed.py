"""Weights saved before the submodule renames still load: ``CausalLM.encoder`` -> ``decoder``,
``CausalLM.pos_encoding`` and ``Seq2SeqTransformer.positional`` -> ``positional_encoding``.

An "old" state dict is a fresh model's state dict with its keys renamed back; it must load with
``strict=True`` into a new model (another seed) and give identical logits — directly, from
``model.safetensors`` (``runs.load_weights``), and through the Lightning module as a checkpoint
of ``--resume`` is (``model.`` in front of every key).
"""
import json
import pickle

import pytest
import torch

from attnlab.models import CausalLM, Seq2SeqTransformer
from attnlab.runs import load_weights

CAUSAL_OLD = {"decoder.": "encoder.", "positional_encoding.": "pos_encoding."}
SEQ2SEQ_OLD = {"positional_encoding.": "positional."}


def old_names(state: dict, renames: dict, prefix: str = "") -> dict:
    """``state`` with the submodule names before the renames (``renames``: new -> old, after
    ``prefix``)."""
    out = {}
    for key, value in state.items():
        rest = key[len(prefix):] if key.startswith(prefix) else None
        new = next((n for n in renames if rest is not None and rest.startswith(n)), None)
        out[key if new is None else prefix + renames[new] + rest[len(new):]] = value
    return out


def lm(seed: int, positional: str = "learned") -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(37, model_dim=16, num_heads=2, num_layers=2, dim_feedforward=32,
                    max_len=24, positional=positional).eval()


IDS = torch.randint(0, 37, (2, 9), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope"])
def test_causal_lm_state_dict_with_the_old_names_loads_strictly(positional):
    saved, fresh = lm(0, positional), lm(1, positional)
    old = old_names(saved.state_dict(), CAUSAL_OLD)
    assert any(k.startswith("encoder.layers.") for k in old)
    assert (positional == "learned") == ("pos_encoding.embedding.weight" in old)
    assert not any(k.startswith(("decoder.", "positional_encoding.")) for k in old)
    fresh.load_state_dict(old, strict=True)
    torch.testing.assert_close(fresh(IDS), saved(IDS), atol=0, rtol=0)
    assert torch.equal(fresh.generate(IDS, 5), saved.generate(IDS, 5))


def test_old_and_new_names_load_into_the_old_and_new_model_alike():
    saved, fresh = lm(0), lm(1)
    fresh.load_state_dict(saved.state_dict(), strict=True)  # the new names, unchanged
    torch.testing.assert_close(fresh(IDS), saved(IDS), atol=0, rtol=0)
    assert "decoder.layers.0.self_attn.qkv_proj.weight" in saved.state_dict()
    assert "positional_encoding.embedding.weight" in saved.state_dict()


def test_strict_loading_still_reports_what_is_wrong_under_the_new_name():
    old = old_names(lm(0).state_dict(), CAUSAL_OLD)
    old["encoder.bogus"] = torch.zeros(1)
    del old["encoder.norm.weight"]
    with pytest.raises(RuntimeError) as err:
        lm(1).load_state_dict(old, strict=True)
    assert '"decoder.bogus"' in str(err.value) and '"decoder.norm.weight"' in str(err.value)


def test_safetensors_file_with_the_old_names_loads_through_load_weights(tmp_path):
    from safetensors.torch import load_file, save_file

    from attnlab.runs import save_weights

    saved = lm(0)
    save_weights(saved, tmp_path / "new.safetensors")  # tied head: one copy, as a run saves it
    save_file(old_names(load_file(tmp_path / "new.safetensors"), CAUSAL_OLD),
              tmp_path / "model.safetensors")
    fresh = lm(1)
    load_weights(fresh, tmp_path / "model.safetensors")
    torch.testing.assert_close(fresh(IDS), saved(IDS), atol=0, rtol=0)


@pytest.mark.slow
def test_lightning_checkpoint_with_the_old_names_restores_through_the_strategy():
    """``--resume`` goes through ``Strategy.load_model_state_dict`` -> the LightningModule's
    ``load_state_dict(checkpoint["state_dict"], strict=True)``, keys prefixed by ``model.``."""
    from lightning.pytorch.strategies import SingleDeviceStrategy

    from attnlab.training.lm import LMModule

    cfg = {"lr": 1e-3, "warmup": 1}
    saved, fresh = LMModule(lm(0), cfg, 10), LMModule(lm(1), cfg, 10)
    checkpoint = {"state_dict": old_names(saved.state_dict(), CAUSAL_OLD, prefix="model.")}
    assert "model.encoder.layers.0.norm1.weight" in checkpoint["state_dict"]
    strategy = SingleDeviceStrategy("cpu")
    strategy.connect(fresh)
    strategy.load_model_state_dict(checkpoint, strict=True)
    torch.testing.assert_close(fresh.model(IDS), saved.model(IDS), atol=0, rtol=0)


def test_seq2seq_positional_module_under_its_old_name_loads_strictly():
    def model(seed):
        torch.manual_seed(seed)
        return Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2, num_layers=1,
                                  dim_feedforward=32, max_len=16, positional="learned").eval()

    saved, fresh = model(0), model(1)
    old = old_names(saved.state_dict(), SEQ2SEQ_OLD)
    assert "positional.embedding.weight" in old
    fresh.load_state_dict(old, strict=True)
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    torch.testing.assert_close(fresh(src, tgt), saved(src, tgt), atol=0, rtol=0)


def test_models_with_the_hook_still_pickle():
    again = pickle.loads(pickle.dumps(lm(0)))
    again.load_state_dict(old_names(lm(2).state_dict(), CAUSAL_OLD), strict=True)
    torch.testing.assert_close(again(IDS), lm(2)(IDS), atol=0, rtol=0)


@pytest.mark.slow
def test_a_run_saved_with_the_old_names_loads_and_resumes(tmp_path):
    """End to end: ``attnlab.load`` reads an old ``model.safetensors``; ``--resume`` an old
    ``checkpoints/last.ckpt`` (the files rewritten as a run before the rename wrote them)."""
    from safetensors.torch import load_file, save_file

    import attnlab
    from attnlab.cli import main

    (tmp_path / "text.txt").write_text("abcabdabcabe " * 40 + "\n", encoding="utf-8")
    run = tmp_path / "run"
    args = ["train", "lm", "--data", str(tmp_path / "text.txt"), "--out", str(run),
            "--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward",
            "32", "--block-size", "8", "--batch-size", "4", "--val-batches", "1", "--warmup", "1",
            "--threads", "1"]
    assert main([*args, "--max-steps", "2"]) == 0
    expected, tokenizer = attnlab.load(run)
    weights = run / "model.safetensors"
    save_file(old_names(load_file(weights), CAUSAL_OLD), weights)
    ckpt_file = run / "checkpoints" / "last.ckpt"
    ckpt = torch.load(ckpt_file, weights_only=True)
    ckpt["state_dict"] = old_names(ckpt["state_dict"], CAUSAL_OLD, prefix="model.")
    assert "model.encoder.layers.0.norm1.weight" in ckpt["state_dict"]
    torch.save(ckpt, ckpt_file)

    model, _ = attnlab.load(run)
    ids = torch.tensor([tokenizer.encode("abcab")])
    torch.testing.assert_close(model(ids), expected(ids), atol=0, rtol=0)
    assert main([*args, "--max-steps", "3", "--resume"]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 3  # 2 restored + 1
