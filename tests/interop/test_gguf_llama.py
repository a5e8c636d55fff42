"""Llama-family ``.gguf`` files: Llama (llama.cpp's permuted q and k), Qwen3 with a head width
of its own (``attention.key_length``), and block-quantised tensors (Q8_0, Q4_0 written by
``gguf.quants.quantize``; Q4_K, which ``gguf`` dequantises but cannot write, as blocks built
here byte by byte).

Offline: tiny random transformers models written with ``gguf.GGUFWriter`` in llama.cpp's
layout, beside ``test_gguf``'s byte-level BPE and ChatML template. Two references, both float32
at atol = rtol = 1e-4: transformers' own reading of the file (``load_gguf``: its GGUF loader,
which dequantises), and the model it was written from with each matrix replaced by what the
file holds (``gguf.quants.dequantize`` of the written bytes), so that the file is proven to
read as written. Greedy generation is compared token for token for 50 tokens, cached against
uncached.
"""
import pytest
import torch
from torch.testing import assert_close

from attnlab.cli import main
from attnlab.interop.checkpoint import read_checkpoint
from attnlab.interop.gguf import gguf_source, load_gguf

from .conftest import transformers
from .gguf_files import Q, gguf, write_llama_gguf
from .test_gguf import PROMPT, _refused, files  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow  # test_gguf.py's files fixture and seven more files

TOL = dict(atol=1e-4, rtol=1e-4)
N = 50


def _tiny(cls, tok, **options):
    config_cls = getattr(transformers, cls.replace("ForCausalLM", "Config"))
    torch.manual_seed(2)
    hf = getattr(transformers, cls)(config_cls(
        vocab_size=len(tok), max_position_embeddings=128, hidden_size=32,
        intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, rope_theta=10000.0, bos_token_id=None, eos_token_id=None,
        pad_token_id=None, **{"tie_word_embeddings": False, **options})).eval()
    with torch.no_grad():  # logits far from flat, so greedy ids are not decided by rounding
        for p in hf.parameters():
            p.normal_(0, 0.2)
    return hf


LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
CASES = {  # name -> (class, gguf architecture, config options, tensor types)
    "llama-f32": ("LlamaForCausalLM", "llama", {}, None),
    "llama-q8_0": ("LlamaForCausalLM", "llama", {}, {"*": Q.Q8_0}),
    "llama-q4_0": ("LlamaForCausalLM", "llama", {}, {"*": Q.Q4_0}),
    "llama-q4_k": ("LlamaForCausalLM", "llama", {}, {"ffn_down.weight": Q.Q4_K, "*": Q.Q8_0}),
    "qwen3-head-dim": ("Qwen3ForCausalLM", "qwen3", {"head_dim": 16}, {"*": Q.Q8_0}),
    # RoPE scaling, which transformers' GGUF reader leaves out: linear from the metadata,
    # Llama 3.1's llama3 from the rope_freqs tensor llama.cpp writes in its place
    "llama-linear": ("LlamaForCausalLM", "llama", {"rope_parameters": {
        "rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}}, None),
    "llama3-rope-freqs": ("LlamaForCausalLM", "llama", {"rope_parameters": LLAMA3}, None),
    # a tied model, written as llama.cpp writes it: no output.weight, the head is the embedding
    "llama-tied": ("LlamaForCausalLM", "llama", {"tie_word_embeddings": True}, {"*": Q.Q8_0}),
}


@pytest.fixture(scope="module")
def written(files):
    found = {}
    for name, (cls, arch, options, types) in CASES.items():
        hf = _tiny(cls, files["tok"], **options)
        path, stored = write_llama_gguf(files["dir"] / f"{name}.gguf", hf, files["tok"],
                                        arch=arch, types=types)
        reference = type(hf)(hf.config).eval()
        reference.load_state_dict(stored)
        found[name] = (path, reference)
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_llama_family_file_reads_as_written_and_converts_to_the_same_model(
        files, written, name):
    path, reference = written[name]
    source = gguf_source(path, task="lm", model_types=None)
    theirs, _ = load_gguf(source.path, source)  # transformers' reader, dequantising
    ckpt = read_checkpoint(path, task="lm")
    ids = torch.tensor([files["tok"].encode("the cat sat on the mat. a dog ran fast!")])
    with torch.no_grad():
        assert_close(theirs(ids).logits, reference(ids).logits, **TOL)  # as written
        assert_close(ckpt.model(ids), theirs(ids).logits, **TOL)
    prompt = ids[:, :6]
    expected = theirs.generate(prompt, max_new_tokens=N, do_sample=False, eos_token_id=None,
                               pad_token_id=0)
    assert expected.shape[1] == 6 + N
    assert ckpt.model.generate(prompt, N).tolist() == expected.tolist()
    assert ckpt.model.generate(prompt, N, use_cache=False).tolist() == expected.tolist()


def test_a_tied_files_head_is_its_embedding(written):
    """A file without output.weight (a tied model's, as llama.cpp writes it): the model is
    built empty and its tensors assigned, so the head is the embedding only once tied; untied,
    it would hold whatever memory it was given."""
    path, reference = written["llama-tied"]
    assert "output.weight" not in {t.name for t in gguf.GGUFReader(path).tensors}
    source = gguf_source(path, task="lm", model_types=None)
    assert source.config["tie_word_embeddings"]
    theirs, _ = load_gguf(source.path, source)
    assert theirs.lm_head.weight is theirs.model.embed_tokens.weight
    ckpt = read_checkpoint(path, task="lm")
    assert ckpt.model.config.tie_weights
    ids = torch.tensor([[5, 9, 2, 7]])
    with torch.no_grad():
        assert_close(theirs(ids).logits, reference(ids).logits, **TOL)
        assert_close(ckpt.model(ids), reference(ids).logits, **TOL)


def test_the_qwen3_files_head_width_is_its_key_length(written):
    """transformers reads no head width from a qwen3 file (its config would say 128): the
    file's ``qwen3.attention.key_length`` is read."""
    source = gguf_source(written["qwen3-head-dim"][0], task="lm", model_types=None)
    assert source.config["head_dim"] == 16
    ckpt = read_checkpoint(source.path, task="lm")
    assert ckpt.config.head_dim == 16 and ckpt.config.qk_norm


def test_generate_on_a_quantised_llama_file_equals_transformers_greedy(files, written, capsys):
    path, _ = written["llama-q4_k"]
    source = gguf_source(path, task="lm", model_types=None)
    theirs, _ = load_gguf(source.path, source)
    tok = files["tok"]
    ids = tok(PROMPT, return_tensors="pt")["input_ids"]
    end = tok.convert_tokens_to_ids("<|endoftext|>")
    out = theirs.generate(ids, max_new_tokens=20, do_sample=False, eos_token_id=end,
                          pad_token_id=end)[0, ids.shape[1]:].tolist()
    out = out[:out.index(end)] if end in out else out
    assert main(["generate", str(path), "--prompt", PROMPT, "--greedy",
                 "--max-new-tokens", "20", "--threads", "1"]) == 0
    assert capsys.readouterr().out == PROMPT + tok.decode(out, skip_special_tokens=True) + "\n"


def test_rope_scaling_the_metadata_or_rope_freqs_declare_is_read(written):
    read = {name: gguf_source(written[name][0], task="lm", model_types=None).config
            for name in ("llama-linear", "llama3-rope-freqs", "llama-f32")}
    assert read["llama-linear"]["rope_parameters"]["rope_type"] == "linear"
    assert read["llama-linear"]["rope_parameters"]["factor"] == 4.0
    assert {k: read["llama3-rope-freqs"]["rope_parameters"][k] for k in LLAMA3} == LLAMA3
    assert read["llama-f32"]["rope_parameters"]["rope_type"] == "default"


@pytest.fixture(scope="module")
def unsupported(files):
    tok, found = files["tok"], {}
    yarn = _tiny("LlamaForCausalLM", tok, rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
        "original_max_position_embeddings": 32})
    found["yarn"] = write_llama_gguf(files["dir"] / "yarn.gguf", yarn, tok, arch="llama")[0]
    other = _tiny("LlamaForCausalLM", tok, rope_parameters={**LLAMA3, "high_freq_factor": 2.0})
    found["freqs"] = write_llama_gguf(files["dir"] / "freqs.gguf", other, tok, arch="llama")[0]
    return found


@pytest.mark.parametrize("command", ["train", "generate"])
@pytest.mark.parametrize("kind,needle", [
    ("yarn", "rope scaling 'yarn' (llama.rope.scaling.type) is not supported; supported: none, "
             "linear"),
    ("freqs", "its rope_freqs tensor scales RoPE's frequencies otherwise than llama3 scaling"),
])
def test_a_rope_scaling_attnlab_cannot_run_is_one_line_and_nothing_is_written(
        files, unsupported, command, kind, needle, tmp_path, capsys):
    path, out = unsupported[kind], tmp_path / "run"
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat.\n" * 20)
    argv = (["train", "lm", "--init", str(path), "--data", str(text), "--out", str(out)]
            if command == "train" else ["generate", str(path), "--prompt", "hi"])
    _refused(capsys, argv, str(path), needle, out=out)


@pytest.fixture(scope="module")
def incomplete(files):
    """Llama files without a metadata key that fixes the model (its RMS epsilon, its context),
    which llama.cpp requires too."""
    tok = files["tok"]
    hf = _tiny("LlamaForCausalLM", tok, rms_norm_eps=1e-5)
    return {method: write_llama_gguf(files["dir"] / f"no-{method}.gguf", hf, tok, arch="llama",
                                     changed={method: None})[0]
            for method in ("add_layer_norm_rms_eps", "add_context_length")}


@pytest.mark.parametrize("command", ["train", "generate"])
@pytest.mark.parametrize("method,key", [("add_layer_norm_rms_eps",
                                         "llama.attention.layer_norm_rms_epsilon"),
                                        ("add_context_length", "llama.context_length")])
def test_a_file_without_a_key_that_fixes_the_model_is_refused_naming_it(
        files, incomplete, command, method, key, tmp_path, capsys):
    # transformers reads such a file with its config class's default (RMS epsilon 1e-6 where
    # the model was trained with 1e-5, a context of 2048): other logits, without a word
    path, out = incomplete[method], tmp_path / "run"
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat.\n" * 20)
    argv = (["train", "lm", "--init", str(path), "--data", str(text), "--out", str(out),
             "--max-steps", "1", "--block-size", "16"]
            if command == "train" else ["generate", str(path), "--prompt", "hi"])
    _refused(capsys, argv, str(path), f"its metadata has no {key}", out=out)


@pytest.mark.parametrize("command, arch, keyless", [
    ("train", "llama", False), ("generate", "llama", False), ("generate", "qwen2", True)])
def test_a_file_rotating_part_of_each_head_is_refused_naming_the_key(files, command, arch,
                                                                     keyless, tmp_path, capsys):
    # llama.cpp rotates the first rope.dimension_count features of a head (partial rotary);
    # attnlab's RoPE turns every feature, so such a file ran on other positions, silently.
    # A Qwen2 file has no key_length (its config.json no head_dim): the width is D / heads
    # (review: it ran, silently)
    hf = _tiny("LlamaForCausalLM" if arch == "llama" else "Qwen2ForCausalLM", files["tok"])
    changed = {"add_rope_dimension_count": 4}
    if keyless:
        changed.update(add_key_length=None, add_value_length=None)
    path = write_llama_gguf(tmp_path / "rot4.gguf", hf, files["tok"], arch=arch,
                            changed=changed)[0]
    out, text = tmp_path / "run", tmp_path / "t.txt"
    text.write_text("the cat sat on the mat.\n" * 20)
    argv = (["train", "lm", "--init", str(path), "--data", str(text), "--out", str(out),
             "--max-steps", "1", "--block-size", "16"]
            if command == "train" else ["generate", str(path), "--prompt", "hi"])
    width = ("(qwen2.embedding_length / attention.head_count)" if keyless
             else f"({arch}.attention.key_length)")
    _refused(capsys, argv, str(path), f"{arch}.rope.dimension_count 4", f"head width 8 {width}",
             out=out)


@pytest.mark.parametrize("changed, needle", [
    ({"add_block_count": 3}, "lacks tensors its metadata describes (model.layers.2."),
    ({"add_feed_forward_length": 128}, "tensor blk.0.ffn_gate.weight is (256, 32) in the file, "
                                       "(128, 32) by its metadata")])
def test_a_file_whose_metadata_describes_other_tensors_is_refused_before_the_run_directory(
        files, changed, needle, tmp_path, capsys):
    # its tensors were compared once the run had started: `attnlab train lm -> DIR` printed,
    # the directory written, then removed, in several lines
    hf = _tiny("Qwen2ForCausalLM", files["tok"])  # (biases and all, mapped to the file's names)
    path = write_llama_gguf(tmp_path / "other.gguf", hf, files["tok"], arch="qwen2",
                            changed=changed)[0]
    out, text = tmp_path / "run", tmp_path / "t.txt"
    text.write_text("the cat sat on the mat.\n" * 20)
    _refused(capsys, ["train", "lm", "--init", str(path), "--data", str(text), "--out", str(out),
                      "--max-steps", "1", "--block-size", "16"], str(path), needle, out=out)
