"""Llama, Qwen2, Qwen3 and Mistral directories (``read_checkpoint``, ``--init``) and the way
back (``to_hf``, ``attnlab export --hf``).

Offline: tiny random models of each family built with transformers' classes and
``save_pretrained`` beside a byte-level BPE tokenizer trained in the test (weights drawn with
std 0.2 so that the logits are far from flat and greedy ids are not decided by rounding).
Logits are compared in float32 at atol = rtol = 1e-4, generated ids exactly.
"""
import json

import pytest
import torch
from torch.testing import assert_close

from .conftest import transformers  # (skips without the hf extra)
from .test_checkpoint import CORPUS, _byte_level_bpe, _tied_head_refused_by_init

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.errors import UsageError  # noqa: E402
from attnlab.interop import from_hf, to_hf  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402

TOL = dict(atol=1e-4, rtol=1e-4)
LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
FAMILIES = {  # name -> (config class, model class, config options)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama3": ("LlamaConfig", "LlamaForCausalLM", {"rope_parameters": LLAMA3,
                                                   "tie_word_embeddings": True}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
    # a head width of its own (hidden 32, 4 heads): Qwen3-0.6B's 1024 = 16 x 64 with heads of
    # 128, in small; Llama's of 12 also keeps o_proj's input (48) off the model width
    "qwen3-head-dim": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "llama-head-dim": ("LlamaConfig", "LlamaForCausalLM", {"head_dim": 12}),
    # one key/value head (MQA), GeGLU, an epsilon that shows (transformers' is 1e-6)
    "llama-mqa-gelu": ("LlamaConfig", "LlamaForCausalLM", {
        "num_key_value_heads": 1, "hidden_act": "gelu", "rms_norm_eps": 0.1}),
    # Qwen3's window, from the first layer on, shorter than the 40-token inputs
    "qwen3-window": ("Qwen3Config", "Qwen3ForCausalLM", {
        "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 0}),
}


def _tiny(name, vocab_size=120, **options):
    config_cls, model_cls, extra = FAMILIES[name]
    sizes = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                 max_position_embeddings=128, bos_token_id=None, eos_token_id=None,
                 pad_token_id=None)
    cfg = getattr(transformers, config_cls)(**{**sizes, **extra, **options})
    torch.manual_seed(0)
    hf = getattr(transformers, model_cls)(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)
    return hf


def save_family(d, name, *, dtype=None, max_shard_size=None, **options):
    """A directory of a tiny ``name`` model (FAMILIES) and a byte-level BPE tokenizer."""
    tok = _byte_level_bpe(["<|endoftext|>"], vocab_size=120)
    hf = _tiny(name, vocab_size=tok.get_vocab_size(), **options)
    if dtype is not None:
        hf = hf.to(dtype)
    hf.save_pretrained(d, **({} if max_shard_size is None else {"max_shard_size": max_shard_size}))
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                         bos_token="<|endoftext|>").save_pretrained(d)
    return d


def _ids(n=40, vocab=120, seed=1):
    return torch.randint(0, vocab, (2, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_from_hf_gives_the_same_logits_greedy_ids_and_cache(name):
    hf = _tiny(name)
    ours = from_hf(hf).eval()
    x = _ids()
    with torch.no_grad():
        assert_close(ours(x), hf(x).logits, **TOL)
        prompt = x[:1, :6]
        theirs = hf.generate(prompt, max_new_tokens=50, do_sample=False)
        assert theirs.shape[1] == 56
        assert ours.generate(prompt, 50).tolist() == theirs.tolist()
        uncached = ours.generate(prompt, 50, use_cache=False)
        whole = ours(theirs)  # the whole continuation at once
    assert uncached.tolist() == theirs.tolist()
    assert whole.argmax(-1)[0, 5:-1].tolist() == theirs[0, 6:].tolist()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_to_hf_writes_the_same_family_back(name):
    hf = _tiny(name)
    # (Qwen2's q/k/v biases go back as Qwen2 when asked: the default writes them as Llama's,
    # whose directory reads any tokenizer, test_to_hf_tokenizers)
    back = to_hf(from_hf(hf), qkv_bias_as="qwen2").eval()
    assert type(back).__name__ == FAMILIES[name][1]
    x = _ids(seed=2)
    with torch.no_grad():
        assert_close(back(x).logits, hf(x).logits, **TOL)


def test_to_hf_default_writes_a_windowed_qwen2_back_as_qwen2_and_names_its_arguments():
    """The default (``qkv_bias_as=None``) writes q/k/v biases as Llama's unless only Qwen2
    holds the parts: a windowed Qwen2 round trip was refused ("--qkv-bias ...
    --sliding-window", flags a Python caller never gave). Asking for Llama's is refused naming
    the Python arguments and the way out."""
    hf = _tiny("qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=0)
    ours = from_hf(hf).eval()
    back = to_hf(ours).eval()
    assert type(back).__name__ == "Qwen2ForCausalLM"
    assert back.config.use_sliding_window and back.config.sliding_window == 8
    x = _ids(seed=3)
    with torch.no_grad():
        assert_close(back(x).logits, hf(x).logits, **TOL)
    assert type(to_hf(from_hf(_tiny("qwen2")))).__name__ == "LlamaForCausalLM"  # no window
    with pytest.raises(ValueError) as refused:
        to_hf(ours, qkv_bias_as="llama")
    message = str(refused.value)
    assert "qkv_bias_as='llama'" in message and "sliding_window=8" in message, message
    assert "qkv_bias_as='qwen2'" in message and "--" not in message, message


def test_config_json_keys_left_out_or_null_read_as_transformers_does():
    from attnlab.interop.llama_config import llama_family_settings

    # (key/value heads given: Mistral's default of 8 does not divide 4 heads)
    sizes = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2}
    assert llama_family_settings({"model_type": "mistral", **sizes})["sliding_window"] == 4096
    assert llama_family_settings({"model_type": "mistral", "sliding_window": None,
                                  **sizes})["sliding_window"] is None
    legacy = llama_family_settings({"model_type": "llama", "rope_theta": 5e5, **sizes,
                                    "rope_scaling": {"type": "linear", "factor": 2.0}})
    assert (legacy["rope_theta"], legacy["rope_scaling"], legacy["rope_factor"]) == \
        (5e5, "linear", 2.0)
    qwen = {"model_type": "qwen2", "use_sliding_window": True, "num_hidden_layers": 4, **sizes}
    # transformers: a window on layers i >= max_window_layers (28 when left out)
    assert llama_family_settings(qwen)["sliding_window"] is None
    assert llama_family_settings({**qwen, "max_window_layers": 0})["sliding_window"] == 4096
    with pytest.raises(ValueError, match="max_window_layers 2 of 4 layers"):
        llama_family_settings({**qwen, "max_window_layers": 2})


def test_a_directory_reads_as_its_family(tmp_path):
    d = save_family(tmp_path / "qwen3", "qwen3")
    ckpt = read_checkpoint(d, task="lm")
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    assert ckpt.model_type == "qwen3" and ckpt.config.qk_norm and ckpt.config.num_kv_heads == 2
    x = _ids(seed=3, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(ckpt.model(x), hf(x).logits, **TOL)


def test_a_sharded_bf16_directory_loads_and_its_digest_covers_the_shards(tmp_path):
    d = save_family(tmp_path / "llama", "llama3", dtype=torch.bfloat16, max_shard_size="20KB")
    index = d / "model.safetensors.index.json"
    shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    assert len(shards) > 1 and not (d / "model.safetensors").exists()
    ckpt = read_checkpoint(d, task="lm")
    assert ckpt.weights == index and ckpt.config.rope_scaling == "llama3"
    hf = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    x = _ids(seed=4, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(ckpt.model(x), hf(x).logits, **TOL)
    shard = d / shards[-1]  # a changed shard changes the digest the run records
    shard.write_bytes(shard.read_bytes()[:-2] + b"  ")
    from attnlab.interop.source import weights_digest

    assert weights_digest(index) != ckpt.sha256


@pytest.mark.parametrize("options,needle", [
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}},
     "rope scaling 'yarn' is not supported; supported: default, linear, llama3"),
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}},
     "rope scaling 'dynamic' is not supported; supported: default, linear, llama3"),
    ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4, "factor": 2.0,
                          "short_factor": [1.0] * 4, "long_factor": [1.0] * 4,
                          "original_max_position_embeddings": 64}},
     "rope scaling 'longrope' is not supported; supported: default, linear, llama3"),
])
def test_what_attnlab_cannot_represent_is_one_line_exit_2(tmp_path, capsys, options, needle):
    d = save_family(tmp_path / "bad", "llama", **options)
    with pytest.raises(UsageError, match=needle):
        read_checkpoint(d, task="lm")
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(out), "--max-steps", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle.split(";")[0] in err[0] and str(d) in err[0]
    assert not out.exists()
    assert main(["generate", str(d), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and str(d) in err[0]


def test_a_block_size_above_the_directorys_positions_names_its_key(tmp_path, capsys):
    """A Llama directory's positions are config.json's max_position_embeddings (GPT-2's are
    n_positions): a --block-size above them is refused naming that key."""
    d = save_family(tmp_path / "llama", "llama")
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(out), "--block-size", "200"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reads at most 128 positions (max_position_embeddings)" in err[0]
    assert not out.exists()


def test_ministrals_window_on_some_layers_is_refused_and_all_or_none_read_as_transformers(
        tmp_path, capsys):
    """A Mistral config.json with layer_types (Ministral's: transformers reads it as
    ``ministral``, full attention on the layers it names) windowed every layer: logits off
    by tenths beyond the window. A mix is refused in one line; all one kind reads as
    transformers reads it."""
    mixed = save_family(tmp_path / "mixed", "mistral", sliding_window=4,
                        layer_types=["full_attention", "sliding_attention"])
    assert main(["generate", str(mixed), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(mixed) in err[0] and "layer_types" in err[0]
    for kind in ("full_attention", "sliding_attention"):
        d = save_family(tmp_path / kind, "mistral", sliding_window=4, layer_types=[kind] * 2)
        ckpt = read_checkpoint(d, task="lm")
        hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
        x = _ids(seed=5, vocab=ckpt.tokenizer.vocab_size)
        with torch.no_grad():
            assert_close(ckpt.model(x), hf(x).logits, **TOL)


@pytest.mark.slow
def test_qwens_window_reads_as_transformers_reads_it(tmp_path, capsys):
    """Qwen's use_sliding_window puts the window on the layers from max_window_layers on:
    from the first layer, attnlab's window; past the last, none (such configs were refused);
    a window on some layers only is refused in one line."""
    for first in (0, 2):
        d = save_family(tmp_path / f"from{first}", "qwen2", use_sliding_window=True,
                        sliding_window=4, max_window_layers=first)
        ckpt = read_checkpoint(d, task="lm")
        assert ckpt.config.sliding_window == (4 if first == 0 else None)
        hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
        x = _ids(seed=6, vocab=ckpt.tokenizer.vocab_size)
        with torch.no_grad():
            assert_close(ckpt.model(x), hf(x).logits, **TOL)
            # a windowed Qwen goes back as one (review), asked for: Llama has no window
            back = to_hf(ckpt.model.eval(), qkv_bias_as="qwen2").eval()
            assert type(back).__name__ == "Qwen2ForCausalLM"
            assert_close(back(x).logits, hf(x).logits, **TOL)
            # and by default: only Qwen2 holds biases beside a window (none: Llama's)
            default = to_hf(ckpt.model.eval()).eval()
            assert type(default).__name__ == ("Qwen2ForCausalLM" if first == 0
                                              else "LlamaForCausalLM")
            assert_close(default(x).logits, hf(x).logits, **TOL)
    mixed = save_family(tmp_path / "mixed", "qwen2", use_sliding_window=True,
                        sliding_window=4, max_window_layers=1)
    assert main(["generate", str(mixed), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(mixed) in err[0] and "some layers only" in err[0]


def test_a_tied_config_with_a_head_of_other_values_is_refused_not_read_tied(tmp_path, capsys):
    """config.json says tie_word_embeddings but the file holds an lm_head.weight of its own:
    transformers reads the two untied, attnlab read the embedding as the head (logits off by
    more than 1). Refused naming the key; a head equal to the embedding still reads."""
    d = save_family(tmp_path / "untied", "llama", tie_word_embeddings=False)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    assert main(["generate", str(d), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(d) in err[0] and "tie_word_embeddings" in err[0]
    from safetensors.torch import load_file  # the same as pytorch_model.bin: through transformers

    torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    with pytest.raises(UsageError, match="tie_word_embeddings is true"):
        read_checkpoint(d, task="lm")
    same = save_family(tmp_path / "same", "llama", tie_word_embeddings=False)
    hf = transformers.AutoModelForCausalLM.from_pretrained(same)
    with torch.no_grad():
        hf.lm_head.weight.copy_(hf.model.embed_tokens.weight)
    hf.save_pretrained(same)
    config = json.loads((same / "config.json").read_text())
    (same / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    ckpt = read_checkpoint(same, task="lm")
    x = _ids(seed=6, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(ckpt.model(x), hf.eval()(x).logits, **TOL)


@pytest.mark.parametrize("form", ["safetensors", "bin"])
def test_train_lm_refuses_a_tied_config_with_its_own_head_before_the_run_directory(
        tmp_path, capsys, form):
    # it was refused once the weights loaded: after the run directory was made (then removed),
    # in more than one line
    d = save_family(tmp_path / "untied", "llama", tie_word_embeddings=False)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    if form == "bin":
        from safetensors.torch import load_file

        torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
        (d / "model.safetensors").unlink()
    _tied_head_refused_by_init(d, tmp_path, capsys)


@pytest.mark.parametrize("form, change, needle", [
    ("safetensors", {"num_hidden_layers": 3}, "model.safetensors lacks tensors that"),
    ("safetensors", {"intermediate_size": 48}, "model.safetensors does not match"),
    ("shards", {"num_hidden_layers": 3}, "model.safetensors.index.json lacks tensors that"),
    ("bin", {"intermediate_size": 48}, "pytorch_model.bin does not match"),
    # fewer layers than the files: the run trained one layer of the two without a word
    ("safetensors", {"num_hidden_layers": 1}, "model.safetensors holds tensors that"),
    ("shards", {"num_hidden_layers": 1}, "model.safetensors.index.json holds tensors that"),
    ("bin", {"num_hidden_layers": 1}, "pytorch_model.bin holds tensors that")])
def test_train_lm_refuses_a_config_json_its_weights_do_not_match_before_the_run_directory(
        tmp_path, capsys, form, change, needle):
    # it was refused once the weights loaded: after `attnlab train lm -> RUN` and the run
    # directory made (then removed), in more than one line
    d = save_family(tmp_path / "llama", "llama",
                    max_shard_size="20KB" if form == "shards" else None)
    if form == "bin":
        from safetensors.torch import load_file

        torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
        (d / "model.safetensors").unlink()
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, **change}))
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(out), "--max-steps", "1", "--block-size", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"attnlab: error: --init {d}: "), err
    assert needle in err[0] and f"{d / 'config.json'}" in err[0], err[0]
    first = {3: "model.layers.2.input_layernorm.weight",
             1: "does not describe (model.layers.1.input_layernorm.weight, "}.get(
        change.get("num_hidden_layers"),
        "model.layers.0.mlp.down_proj.weight is (32, 64) there, (32, 48) by the config")
    assert first in err[0], err[0]
    assert not out.exists()


def test_a_setting_the_checkpoint_fixes_that_is_no_shape_is_not_called_one(tmp_path, capsys):
    """--rope-theta and --layer-norm-eps with --init are refused, but they are not the model's
    shape: the message said "the shape comes from the checkpoint" for them."""
    d = save_family(tmp_path / "llama", "llama")
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    for flags, why in ((["--rope-theta", "5000"], "the checkpoint's weights were trained with it"),
                       (["--layer-norm-eps", "1e-3"], "the checkpoint's weights were trained "
                                                      "with it"),
                       (["--num-layers", "3"], "the shape comes from the checkpoint")):
        assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                     "--out", str(tmp_path / "run"), *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"drop {flags[0]} ({why})" in err[0], err


def _train_1(tmp_path, d):
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    code = main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(out), "--max-steps", "1", "--block-size", "8"])
    return code, out


def test_train_lm_takes_a_tied_base_model_saved_as_pytorch_model_bin(tmp_path, capsys):
    """``LlamaModel``'s tensors (no "model." prefix, no head) in pytorch_model.bin, as
    transformers reads them: refused as lacking model.embed_tokens.weight... by the header
    check, which named attnlab's own tensors for a file transformers reads."""
    from safetensors.torch import load_file

    d = save_family(tmp_path / "llama", "llama", tie_word_embeddings=True)
    tensors = load_file(d / "model.safetensors")
    torch.save({k.removeprefix("model."): v for k, v in tensors.items() if k != "lm_head.weight"},
               d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    code, out = _train_1(tmp_path, d)
    assert code == 0, capsys.readouterr().err
    assert (out / "model.safetensors").is_file()


def test_train_lm_says_one_line_of_a_safetensors_header_that_overflows(tmp_path, capsys):
    """The header check let the OverflowError of a header length past 2**63 out as a
    traceback; the run's own read of the file names it in one line."""
    d = save_family(tmp_path / "llama", "llama")
    (d / "model.safetensors").write_bytes(b"\xff" * 8 + b"x" * 100)
    code, out = _train_1(tmp_path, d)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"attnlab: error: {d / 'model.safetensors'} is not a readable "
                           "safetensors file (") and "header too large" in last, err
    assert not out.exists()


def test_generate_refuses_weights_of_more_layers_than_config_json(tmp_path, capsys):
    """The direct reader's own load (``generate DIR`` of Llama safetensors) refuses them too."""
    d = save_family(tmp_path / "llama", "llama")
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    assert main(["generate", str(d), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not describe (model.layers.1.input_layernorm.weight, " in err[0]


@pytest.mark.parametrize("form", ["safetensors", "bin"])
def test_tensors_transformers_ignores_are_not_called_undescribed(tmp_path, form):
    """An old checkpoint's rotary_emb.inv_freq and a tied head stored anyway (of the
    embedding's values) are read by transformers without a word: so by the header checks."""
    from safetensors.torch import load_file, save_file

    from attnlab.interop.direct_read import files_disagree, transformers_files_disagree

    d = save_family(tmp_path / "llama", "llama", tie_word_embeddings=True)
    tensors = load_file(d / "model.safetensors")
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    for i in range(2):
        tensors[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
    (d / "model.safetensors").unlink()
    if form == "bin":
        torch.save(tensors, d / "pytorch_model.bin")
        compare, weights = transformers_files_disagree, d / "pytorch_model.bin"
    else:
        save_file(tensors, d / "model.safetensors", metadata={"format": "pt"})
        compare, weights = files_disagree, d / "model.safetensors"
    config = json.loads((d / "config.json").read_text())
    assert compare(config, weights) == ([], [], [])
    tensors["model.layers.2.mlp.up_proj.weight"] = torch.ones(2)
    (torch.save(tensors, weights) if form == "bin" else
     save_file(tensors, weights, metadata={"format": "pt"}))
    assert compare(config, weights)[2] == ["model.layers.2.mlp.up_proj.weight"]


def test_a_rope_scaling_without_its_factor_is_one_line_exit_2(tmp_path, capsys):
    """A legacy ``rope_scaling`` of ``{"type": "linear"}`` alone ended in a KeyError traceback."""
    d = save_family(tmp_path / "llama", "llama")
    config = json.loads((d / "config.json").read_text())
    config.pop("rope_parameters", None)
    (d / "config.json").write_text(json.dumps({**config, "rope_scaling": {"type": "linear"}}))
    _refused_by_generate_and_init(d, tmp_path, capsys, "rope scaling 'linear' has no factor")


def _refused_by_generate_and_init(d, tmp_path, capsys, needle):
    """``generate d`` and ``train lm --init d`` exit 2 with one line naming ``d`` and saying
    ``needle``, and no run directory is written."""
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    for argv in (["generate", str(d), "--prompt", "hi"],
                 ["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                  "--out", str(out), "--max-steps", "1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(d) in err[0]
        assert needle in err[0], err[0]
    assert not out.exists()


def _edit_config(d, change):
    """``d``'s config.json with ``change(config, config["rope_parameters"])`` applied."""
    config = json.loads((d / "config.json").read_text())
    change(config, config["rope_parameters"])
    (d / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("change, context", [
    # transformers 5 fills a llama3 scaling's missing context with max_position_embeddings
    # (128 here); attnlab read Llama 3.1's 8192, and other logits, silently
    (lambda c, rope: rope.pop("original_max_position_embeddings"), 128),
    # a top-level key wins over the scaling's (transformers' standardize_rope_params)
    (lambda c, rope: c.update(original_max_position_embeddings=32), 32)])
def test_a_llama3_scalings_original_context_is_read_as_transformers_reads_it(
        tmp_path, change, context):
    d = save_family(tmp_path / "llama3", "llama3")
    _edit_config(d, change)
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    assert hf.config.rope_parameters["original_max_position_embeddings"] == context
    ckpt = read_checkpoint(d, task="lm")
    assert ckpt.config.rope_original_max_len == context
    x = _ids(seed=4, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(ckpt.model(x), hf(x).logits, **TOL)


@pytest.mark.parametrize("change, theta, scaling", [
    # a legacy rope_scaling beside rope_parameters: transformers 5 reads rope_scaling
    # (attnlab read rope_parameters' plain RoPE: other logits, silently)
    (lambda c, rope: c.update(rope_scaling={"rope_type": "linear", "factor": 4.0}),
     10000.0, "linear"),
    # the θ inside rope_scaling wins over the top-level one (attnlab read the top-level)
    (lambda c, rope: c.update(rope_parameters=None, rope_theta=1e6, rope_scaling={
        "rope_type": "linear", "factor": 2.0, "rope_theta": 50.0}), 50.0, "linear")])
def test_rope_keys_given_twice_are_read_in_transformers_order(tmp_path, change, theta, scaling):
    d = save_family(tmp_path / "llama", "llama")
    _edit_config(d, change)
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    assert hf.config.rope_parameters["rope_theta"] == theta
    ckpt = read_checkpoint(d, task="lm")
    assert (ckpt.config.rope_theta, ckpt.config.rope_scaling) == (theta, scaling)
    x = _ids(seed=5, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(ckpt.model(x), hf(x).logits, **TOL)


@pytest.mark.parametrize("rope, where", [
    ({"rope_type": "linear", "factor": 4.0}, "rope_parameters"),
    (LLAMA3, "top level")])
def test_a_scaled_rope_on_part_of_each_head_is_refused_naming_partial_rotary_factor(
        tmp_path, capsys, rope, where):
    """transformers' linear and llama3 frequencies read partial_rotary_factor (RoPE on part of
    each head, which its Llama family cannot run: a shape error at the first forward); attnlab
    ran such a directory with every feature rotated, without a word. (Plain RoPE does not read
    the key, in transformers as in attnlab.)"""
    d = save_family(tmp_path / "llama", "llama",
                    rope_parameters={**rope, "partial_rotary_factor": 0.5})
    if where == "top level":  # beside a legacy rope_scaling, as transformers 4 wrote it
        _edit_config(d, lambda c, rope: c.update(partial_rotary_factor=rope.pop(
            "partial_rotary_factor"), rope_scaling=c.pop("rope_parameters")))
    with pytest.raises(RuntimeError):  # transformers cannot run it either
        transformers.AutoModelForCausalLM.from_pretrained(d)(_ids(vocab=50))
    _refused_by_generate_and_init(d, tmp_path, capsys, "partial_rotary_factor 0.5 with rope "
                                  f"scaling {rope['rope_type']!r}: RoPE on part of each head")


@pytest.mark.parametrize("key", ["low_freq_factor", "high_freq_factor"])
def test_a_llama3_scaling_without_a_frequency_factor_is_one_line_exit_2(tmp_path, capsys, key):
    """transformers refuses it (a KeyError); attnlab read 1 or 4 in its place, and generate
    blamed the tokenizer files for transformers' KeyError."""
    d = save_family(tmp_path / "llama3", "llama3")
    _edit_config(d, lambda c, rope: rope.pop(key))
    _refused_by_generate_and_init(d, tmp_path, capsys, f"rope scaling 'llama3' has no {key}")


def test_kv_heads_that_do_not_divide_the_heads_are_named_as_config_json_names_them(
        tmp_path, capsys):
    """train lm --init said '--num-heads (4) must be divisible by --num-kv-heads (3)': flags
    the user never gave."""
    d = save_family(tmp_path / "llama", "llama")
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 3}))
    _refused_by_generate_and_init(
        d, tmp_path, capsys, "num_attention_heads 4 is not divisible by num_key_value_heads 3")


def _other_family(d, name):
    """A tiny T5 (encoder-decoder) or Phi (a causal LM of another block) directory."""
    if name == "t5":
        model = transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=64, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8))
    else:
        model = transformers.PhiForCausalLM(transformers.PhiConfig(
            vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=2, max_position_embeddings=32))
    model.save_pretrained(d)
    tok = _byte_level_bpe(["<|endoftext|>"], vocab_size=64)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(d)
    return d


@pytest.mark.parametrize("name", ["t5", "phi"])
@pytest.mark.parametrize("command", ["train", "generate"])
def test_an_unsupported_family_names_its_model_type_and_the_supported_list(
        tmp_path, capsys, name, command):
    d = _other_family(tmp_path / name, name)
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    argv = (["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"), "--out",
             str(out)] if command == "train" else ["generate", str(d), "--prompt", "hi"])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"model_type {name!r}" in err[0] and str(d) in err[0]
    assert "supported: gpt2, llama, qwen2, qwen3, mistral" in err[0]
    assert not out.exists()


def test_a_from_scratch_llama_block_exports_as_llama_and_the_rest_is_refused():
    from attnlab.models import CausalLM

    parts = dict(arch="llama", positional="rope", norm="rms", ff="swiglu", bias=False)
    ours = CausalLM(80, model_dim=32, num_heads=4, num_layers=2, num_kv_heads=2, max_len=64,
                    **parts).eval()
    hf = to_hf(ours).eval()
    assert type(hf).__name__ == "LlamaForCausalLM"
    x = _ids(vocab=80, seed=5)
    with torch.no_grad():
        assert_close(hf(x).logits, ours(x), **TOL)
    with pytest.raises(ValueError, match="GPT-2 needs norm='layer', this CausalLM has "
                                         "norm='rms'"):  # without RoPE: no Llama family
        to_hf(CausalLM(80, model_dim=32, num_heads=4, norm="rms", ff="swiglu"))
    with pytest.raises(ValueError, match="Llama family needs ff='swiglu', this CausalLM has "
                                         "ff='mlp'"):
        to_hf(CausalLM(80, model_dim=32, num_heads=4, positional="rope", norm="rms"))
    with pytest.raises(ValueError, match="GPT-2 needs head_dim=8, this CausalLM has "
                                         "head_dim=16"):  # heads wider than D / H
        to_hf(CausalLM(80, model_dim=32, num_heads=4, head_dim=16))
    with pytest.raises(ValueError, match="different families"):
        to_hf(CausalLM(80, model_dim=32, num_heads=4, qk_norm=True, qkv_bias=True, **parts))
    with pytest.raises(ValueError, match="qkv_bias=False with bias=True"):
        to_hf(CausalLM(80, model_dim=32, num_heads=4, positional="rope", norm="rms",
                       ff="swiglu", bias=True, qkv_bias=False))
    biased = CausalLM(80, model_dim=32, num_heads=4, positional="rope", norm="rms",
                      ff="swiglu", bias=True).eval()  # Llama's attention_bias and mlp_bias
    with torch.no_grad():
        for p in biased.parameters():
            p.normal_(0, 0.2)
        hf = to_hf(biased).eval()
        assert hf.config.attention_bias and hf.config.mlp_bias
        assert_close(hf(x).logits, biased(x), **TOL)
        assert_close(from_hf(hf).eval()(x), biased(x), **TOL)


@pytest.mark.slow
def test_a_run_trained_with_arch_llama_exports_as_llama(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("\n".join(CORPUS * 4))
    out = tmp_path / "run"
    assert main(["train", "lm", "--data", str(text), "--out", str(out), "--arch", "llama",
                 "--num-kv-heads", "1", "--model-dim", "16", "--num-heads", "2",
                 "--num-layers", "1", "--max-steps", "2", "--block-size", "16",
                 "--batch-size", "4", "--val-batches", "1", "--threads", "1"]) == 0
    assert main(["export", str(out), "--hf", str(tmp_path / "hf")]) == 0
    assert "LlamaForCausalLM" in capsys.readouterr().err
    model, tokenizer = attnlab.load(out)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == "LlamaForCausalLM" and hf.config.num_key_value_heads == 1
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat.")[:16]])
    with torch.no_grad():
        assert_close(hf(ids).logits, model.eval()(ids), **TOL)


@pytest.mark.slow
@pytest.mark.parametrize("name,cls,settings", [
    ("qwen2", "Qwen2ForCausalLM", {"qkv_bias": True, "num_kv_heads": 2}),
    ("qwen3-head-dim", "Qwen3ForCausalLM", {"head_dim": 16, "qk_norm": True}),
])
def test_init_trains_reloads_and_exports_the_family(tmp_path, name, cls, settings):
    d = save_family(tmp_path / name, name)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(CORPUS * 4))
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(d), "--data", str(text), "--out", str(out),
                 "--max-steps", "2", "--block-size", "16", "--batch-size", "2",
                 "--val-batches", "1", "--threads", "1"]) == 0
    model, tokenizer = attnlab.load(out)
    assert {k: getattr(model.config, k) for k in settings} == settings
    assert main(["export", str(out), "--hf", str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == cls
    assert hf.config.head_dim == settings.get("head_dim", 32 // 4)
    x = _ids(vocab=tokenizer.vocab_size, seed=6)
    with torch.no_grad():
        assert_close(hf(x).logits, model.eval()(x), **TOL)


@pytest.mark.slow
def test_generate_on_a_llama_directory_equals_transformers_greedy(tmp_path, capsys):
    d = save_family(tmp_path / "llama", "llama")
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    prompt = "the cat sat"
    ids = tok(prompt, return_tensors="pt").input_ids
    theirs = hf.generate(ids, max_new_tokens=20, do_sample=False)
    capsys.readouterr()
    assert main(["generate", str(d), "--prompt", prompt, "--greedy",
                 "--max-new-tokens", "20"]) == 0
    printed = capsys.readouterr().out
    assert tok.decode(theirs[0], skip_special_tokens=True).strip() in printed.strip()


def test_a_head_width_of_its_own_is_read_recorded_and_written_back(tmp_path):
    """Qwen3's head_dim (16 here, hidden 32 / 4 heads = 8): the settings carry it, the model's
    projections have its shapes, and to_hf writes it back."""
    d = save_family(tmp_path / "qwen3", "qwen3-head-dim")
    ckpt = read_checkpoint(d, task="lm")
    assert ckpt.config.head_dim == 16 and ckpt.config.model_dim == 32
    attn = ckpt.model.decoder.layers[0].self_attn
    assert attn.qkv_proj.weight.shape == (4 * 16 + 2 * 2 * 16, 32)  # q: H·hd; k, v: H_kv·hd
    assert attn.o_proj.weight.shape == (32, 4 * 16)
    back = to_hf(ckpt.model)
    assert back.config.head_dim == 16
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    x = _ids(seed=7, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(back.eval()(x).logits, hf(x).logits, **TOL)
    # a checkpoint whose head_dim is hidden / heads records none (as before the setting)
    plain = read_checkpoint(save_family(tmp_path / "llama", "llama"), task="lm")
    assert plain.config.head_dim is None



@pytest.mark.parametrize("model_type", ["llama", "mistral", "qwen2", "qwen3"])
def test_key_value_heads_left_out_or_null_are_transformers_own(model_type):
    from huggingface_hub.errors import StrictDataclassError

    from attnlab.interop.llama_config import llama_family_settings

    sizes = {"hidden_size": 128, "num_attention_heads": 64, "head_dim": 2}
    for given in ({}, {"num_key_value_heads": None}):
        ours = llama_family_settings({"model_type": model_type, **sizes, **given})
        try:
            theirs = transformers.AutoConfig.for_model(model_type, **sizes, **given)
        except StrictDataclassError:  # Mistral's class takes no null; its own code reads
            assert (model_type, ours["num_kv_heads"]) == ("mistral", 64)  # one as H
            continue
        assert ours["num_kv_heads"] == theirs.num_key_value_heads, given


@pytest.mark.parametrize("name, options", [
    ("mistral", {"attention_bias": True, "mlp_bias": True}),
    ("qwen2", {"attention_bias": True}),  # q/k/v biases whatever the key says
    ("qwen3", {"mlp_bias": True})])
def test_bias_keys_a_familys_class_does_not_read_are_ignored_as_transformers_ignores_them(
        tmp_path, capsys, name, options):
    """transformers' Mistral has no biases, Qwen2 q/k/v biases always, Qwen3 no feed-forward
    biases, whatever config.json's attention_bias and mlp_bias say: such a Mistral directory
    was written as a run directory then refused in several lines (tensors missing), the Qwen
    ones refused with exit 2, though transformers reads all three."""
    d = save_family(tmp_path / name, name, **options)
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    assert json.loads((d / "config.json").read_text())[next(iter(options))] is True
    ckpt = read_checkpoint(d, task="lm")
    x = _ids(seed=8, vocab=ckpt.tokenizer.vocab_size)
    with torch.no_grad():
        assert_close(ckpt.model(x), hf(x).logits, **TOL)
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy",
                 "--max-new-tokens", "3"]) == 0


def test_qwen3s_attention_bias_is_refused_naming_its_key(tmp_path, capsys):
    """Qwen3's attention_bias puts biases on q, k, v and o but none on the feed-forward
    network, which attnlab's --bias cannot leave out."""
    d = save_family(tmp_path / "qwen3", "qwen3", attention_bias=True)
    _refused_by_generate_and_init(d, tmp_path, capsys,
                                  "attention_bias True (qwen3 has no feed-forward biases)")


def test_swish_is_silu_as_transformers_reads_it():
    hf = _tiny("llama", hidden_act="swish")
    ours = from_hf(hf).eval()
    assert ours.config.ff == "swiglu"
    x = _ids(seed=3)
    with torch.no_grad():
        assert_close(ours(x), hf(x).logits, **TOL)
    assert to_hf(ours).config.hidden_act == "silu"
