"""A damaged ``.gguf`` file: one cut short (an interrupted download or copy; in a tensor or in
its header) and one with a tensor type id the ``gguf`` reader does not know (a newer
llama.cpp's). Both are refused in one line naming the file and the tensor (or the header),
before a run directory is written, where ``gguf``'s own reader fails with numpy's words about a
reshape, a view or an enum. So is a tensor whose values dequantise to NaN or infinity.

The files are written here with ``gguf.GGUFWriter``: their header alone is read before the
refusal, so a few small tensors and no model stand for a real file.
"""
from types import SimpleNamespace

import numpy as np
import pytest

from attnlab.interop.gguf import _SCALES, _not_finite

from .test_gguf import _refused

gguf = pytest.importorskip("gguf")


def _write(path):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"):
        w.add_tensor(name, np.ones((8, 64) if name.endswith("q.weight") else (64,), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _argvs(path, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat.\n" * 20, encoding="utf-8")
    return {"generate": ["generate", str(path), "--prompt", "hi"],
            "train": ["train", "lm", "--init", str(path), "--data", str(corpus),
                      "--out", str(tmp_path / "run")]}


def test_a_file_cut_short_names_the_tensor_it_ends_in(tmp_path, capsys):
    path = _write(tmp_path / "whole.gguf")
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:-100])  # into output_norm.weight, the last tensor
    for argv in _argvs(cut, tmp_path).values():
        _refused(capsys, argv, str(cut), "is cut short", "tensor output_norm.weight",
                 f"the file has {len(data) - 100:,} bytes", out=tmp_path / "run")


@pytest.mark.parametrize("where", ["at byte 10", "in its metadata", "in its tensor table"])
def test_a_file_cut_short_in_its_header_says_so(where, tmp_path, capsys):
    # gguf's reader failed in numpy's words ("index 0 is out of bounds for axis 0 with size 0",
    # "When changing to a larger dtype, its size must be a divisor ...")
    path = _write(tmp_path / "whole.gguf")
    reader = gguf.GGUFReader(path)
    end = {"at byte 10": 10,
           "in its metadata": reader.fields["general.architecture"].offset + 10,
           "in its tensor table": reader.tensors[1].field.offset + 10}[where]
    del reader
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:end])
    for argv in _argvs(cut, tmp_path).values():
        _refused(capsys, argv, str(cut), "is cut short in its header (needs byte",
                 f"the file has {end:,};", "fetch or copy it again", out=tmp_path / "run")


def test_a_tensor_of_a_type_id_gguf_does_not_know_is_named(tmp_path, capsys):
    path = _write(tmp_path / "new-type.gguf")
    reader = gguf.GGUFReader(path, "r+")
    (q,) = [t for t in reader.tensors if t.name == "blk.0.attn_q.weight"]
    q.field.parts[4][0] = 250  # its type id, in the header (memory-mapped for writing)
    reader.data.flush()
    del reader, q
    for argv in _argvs(path, tmp_path).values():
        _refused(capsys, argv, str(path), "tensor blk.0.attn_q.weight", "type id 250",
                 "the gguf reader does not know", out=tmp_path / "run")


@pytest.mark.parametrize("kind", [*_SCALES, "F32", "F16", "BF16"])
def test_the_values_counted_not_finite_from_the_bytes_are_those_dequantised(kind):
    """Random blocks, one byte in 20 set to 0xFF (a float16 scale NaN or infinite): the count
    read from the bytes before a run (a block's scales, ``_SCALES``) is gguf's dequantised."""
    kind = gguf.GGMLQuantizationType[kind]
    _, size = gguf.GGML_QUANT_SIZES[kind]
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, (64, 16 * size), dtype=np.uint8)
    raw[rng.random(raw.shape) < 0.05] = 0xFF
    with np.errstate(invalid="ignore"):
        expected = int((~np.isfinite(gguf.quants.dequantize(raw, kind))).sum())
    data = raw.view({"F32": np.float32, "F16": np.float16}.get(kind.name, np.uint8))
    assert expected > 0
    assert _not_finite(SimpleNamespace(tensor_type=kind, data=data)) == expected


@pytest.mark.slow
@pytest.mark.parametrize("command", ["generate", "train"])
def test_a_tensor_that_dequantises_to_nan_is_named_before_a_run_directory(
        command, tmp_path, capsys):
    """A Q8_0 block whose float16 scale is NaN (damaged bytes; a quantisation gone wrong):
    the model would print nothing, or noise, and exit 0. ``train`` refuses it before
    ``-> OUT`` (the one line), OUT never made."""
    import torch

    from .conftest import transformers
    from .gguf_files import Q, write_llama_gguf
    from .test_generate_chat import _tokenizer

    tok = _tokenizer()
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tok), max_position_embeddings=64, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=False)).eval()
    path, _ = write_llama_gguf(tmp_path / "nan.gguf", hf, tok, arch="llama",
                               types={"ffn_down.weight": Q.Q8_0})
    reader = gguf.GGUFReader(path, "r+")
    (down,) = [t for t in reader.tensors if t.name == "blk.1.ffn_down.weight"]
    down.data[3, :2] = np.array([np.nan], np.float16).view(np.uint8)  # a block's scale
    reader.data.flush()
    del reader, down
    argv = _argvs(path, tmp_path)[command]
    _refused(capsys, [*argv, "--max-steps", "1", "--block-size", "16"]
             if command == "train" else [*argv, "--max-new-tokens", "3"],
             str(path), "tensor blk.1.ffn_down.weight has 32 of its 2,048 values not finite",
             out=tmp_path / "run")
