"""A Llama-family safetensors directory read straight into a CausalLM (``direct_read``), in the
dtype asked for (``read_checkpoint(dtype=)``, ``generate --dtype``).

Offline: tiny random models of each family saved by transformers (``save_family``). The
weights read directly must be the very values the transformers route gives (compared exactly:
a bf16 value survives float32 and back), a bf16 checkpoint read as "auto" must stay bf16 with
its head still tied, and a directory lacking a tensor or holding one of another shape is
refused naming it, before any parameter memory is allocated.
"""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from .conftest import transformers  # (skips without the hf extra)
from .test_llama_family import FAMILIES, save_family

from attnlab.cli import main  # noqa: E402
from attnlab.errors import UsageError  # noqa: E402
from attnlab.interop import from_hf  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.interop.weights import SafetensorsTensors, parameters_on_meta  # noqa: E402


def _reference(d, dtype):
    """What the transformers route gives: from_pretrained, from_hf (float32), cast."""
    hf = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    return from_hf(hf).to(dtype).eval()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_reads_the_values_transformers_reads(tmp_path, name):
    d = save_family(tmp_path / name, name, dtype=torch.bfloat16)
    ours = read_checkpoint(d, task="lm").model  # dtype None: float32, what --init trains
    assert {p.dtype for p in ours.parameters()} == {torch.float32}
    ref = _reference(d, torch.float32)
    mine, theirs = ours.state_dict(), ref.state_dict()
    assert mine.keys() == theirs.keys()
    for key in mine:
        assert torch.equal(mine[key], theirs[key]), key
    ids = torch.randint(0, 100, (1, 12))
    with torch.no_grad():
        assert ours.generate(ids, 10).tolist() == ref.generate(ids, 10).tolist()


def test_a_sharded_bf16_checkpoint_stays_bf16_with_auto_and_its_head_stays_tied(tmp_path):
    d = save_family(tmp_path / "llama3", "llama3", dtype=torch.bfloat16, max_shard_size="20KB")
    assert (d / "model.safetensors.index.json").is_file()
    model = read_checkpoint(d, task="lm", dtype="auto").model
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model.lm_head.weight is model.token_embedding.weight  # one tensor, as transformers'
    assert not any(p.is_meta for p in model.parameters())
    ref = _reference(d, torch.bfloat16)
    for (key, mine), theirs in zip(model.state_dict().items(), ref.state_dict().values()):
        assert torch.equal(mine, theirs), key
    # RoPE's tables stay float32 (a cast model's are bf16); both are rounded to the queries'
    # dtype where they are used, so the arithmetic is the same
    rope = model.decoder.layers[0].self_attn.pos_embeddings
    theirs = ref.decoder.layers[0].self_attn.pos_embeddings
    assert rope.cos.dtype == torch.float32
    assert torch.equal(rope.cos.to(torch.bfloat16), theirs.cos)


def test_float16_is_read_as_asked_and_auto_follows_config_json(tmp_path):
    d = save_family(tmp_path / "qwen2", "qwen2", dtype=torch.bfloat16)
    half = read_checkpoint(d, task="lm", dtype="float16").model
    assert {p.dtype for p in half.parameters()} == {torch.float16}
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "dtype": "float32"}))
    auto = read_checkpoint(d, task="lm", dtype="auto").model  # the config names float32
    assert {p.dtype for p in auto.parameters()} == {torch.float32}


def test_a_gpt2_directory_is_cast_to_the_dtype_asked(tmp_path):
    from .test_checkpoint import save_gpt2

    d = save_gpt2(tmp_path / "gpt2")
    model = read_checkpoint(d, task="lm", dtype="bfloat16").model
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    with pytest.raises(ValueError, match="dtype must be one of auto, bfloat16"):
        read_checkpoint(d, task="lm", dtype="int8")


def _rewrite(d, change):
    path = d / "model.safetensors"
    tensors = load_file(path)
    change(tensors)
    save_file(tensors, path, metadata={"format": "pt"})


def test_a_missing_or_reshaped_tensor_is_refused_naming_it(tmp_path):
    d = save_family(tmp_path / "missing", "qwen2")
    _rewrite(d, lambda t: t.pop("model.layers.1.self_attn.k_proj.bias"))
    with pytest.raises(UsageError, match=r"lacks tensors .*\(model\.layers\.1\.self_attn"
                                         r"\.k_proj\.bias\)"):
        read_checkpoint(d, task="lm")
    d = save_family(tmp_path / "reshaped", "llama")
    _rewrite(d, lambda t: t.update({"model.layers.0.mlp.up_proj.weight": torch.zeros(3, 32)}))
    with pytest.raises(UsageError, match=r"model\.layers\.0\.mlp\.up_proj\.weight is \(3, 32\) "
                                         r"there, \(64, 32\) by the config"):
        read_checkpoint(d, task="lm")


def test_safetensors_tensors_reads_into_any_dtype_and_refuses_another_shape(tmp_path):
    path = tmp_path / "w.safetensors"
    w = torch.randn(4, 3).to(torch.bfloat16)
    save_file({"w": w, "e": torch.zeros(0)}, path)
    with SafetensorsTensors([path]) as tensors:
        same = torch.empty(4, 3, dtype=torch.bfloat16)
        assert tensors.read("w", same) is same and torch.equal(same, w)
        assert torch.equal(tensors.read("w", torch.empty(4, 3)), w.float())
        assert tensors.read("e").shape == (0,)
        with pytest.raises(ValueError, match=r"w is \(4, 3\) in the file, the parameter \(3, 4\)"):
            tensors.read("w", torch.empty(3, 4))


def test_parameters_on_meta_skips_the_initialisers_and_keeps_buffers():
    from attnlab.models import CausalLM

    register = torch.nn.Module.register_parameter
    with parameters_on_meta():
        model = CausalLM(vocab_size=50, model_dim=16, num_heads=2, num_layers=1,
                         positional="rope", max_len=32)
    assert torch.nn.Module.register_parameter is register  # put back
    assert all(p.is_meta for p in model.parameters())
    assert model.lm_head.weight is model.token_embedding.weight
    rope = model.decoder.layers[0].self_attn.pos_embeddings
    assert not rope.cos.is_meta and rope.cos[0].eq(1).all()  # cos(0 · ω) = 1
    assert not torch.nn.Linear(2, 2).weight.is_meta  # outside the block, as usual


@pytest.mark.slow
def test_generate_dtype_reads_the_directory_in_it_and_refuses_it_with_quantize(tmp_path, capsys):
    d = save_family(tmp_path / "llama", "llama", dtype=torch.bfloat16)
    prompt = ["generate", str(d), "--prompt", "the cat", "--greedy", "--max-new-tokens", "6"]
    assert main([*prompt, "--dtype", "float32"]) == 0
    in_float32 = capsys.readouterr().out
    hf = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    ids = tok("the cat", return_tensors="pt").input_ids
    theirs = hf.generate(ids, max_new_tokens=6, do_sample=False)
    assert in_float32.strip() == tok.decode(theirs[0], skip_special_tokens=True).strip()
    assert main([*prompt, "--quantize", "int8"]) == 0  # auto reads float32 for int8
    capsys.readouterr()
    assert main([*prompt, "--quantize", "int8", "--dtype", "bfloat16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["attnlab: error: --dtype bfloat16: --quantize int8 multiplies int8 weights "
                   "in float32 (PyTorch's int8 kernels); drop one of them"]
