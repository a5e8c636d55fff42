"""``--init FILE.gguf`` (``read_checkpoint``, the path ``train lm --init`` and ``generate
FILE.gguf`` take) reads a large file and converts the model read from a GPT-2 or a Llama file
holding its weights in memory about once: ``load_gguf`` fills an empty ``transformers`` model
with the tensors the reader dequantised (one at a time, from the memory-mapped file), rather
than building a randomly initialised model and copying them in; that model is then given up
tensor by tensor as attnlab's ``CausalLM`` takes its tensors.

The files: a GPT-2 and a Llama of about 55M parameters (220 MB in float32), their matrices in
Q8_0 (``gguf_files.write_big_llama``, and a GPT-2 of its width and depth written in llama.cpp's
layout, Conv1D matrices transposed). Measured in a fresh interpreter through
``read_checkpoint``: the peak of its resident memory (VmHWM) while ``load_gguf`` reads the file,
then, VmHWM reset once it has (writing 5 to ``/proc/self/clear_refs``), to the end of the
conversion, each less what the interpreter held before ``read_checkpoint``, in units of the
float32 weights: the file is read and dequantised once for both. With glibc's mmap threshold
fixed (``MALLOC`` below) the read measured 1.07 and the conversion 0.86 (GPT-2) and 0.83
(Llama), the same on every run; a conversion that builds attnlab's model beside the one read
(``release=False`` in ``read_checkpoint``) measured 1.79 and 1.80; a read that built a random
model beside the reader's copy of every tensor measured 2.3.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from .conftest import transformers
from .gguf_files import Q, _add_tokenizer, _close
from .gguf_files import write_big_llama as _write_llama
from .test_generate_chat import _tokenizer
from .test_gguf import _CONV1D
from .test_gguf import _gguf_name as _gpt2_name

gguf = pytest.importorskip("gguf")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self")]

# glibc's malloc raises its mmap threshold each time a large block is freed, after which freed
# tensors of up to 32 MB stay in its heap: the peak then held 0.1-0.15 more on some runs and not
# others. A fixed threshold hands every freed tensor back at once, so the peak is what attnlab
# holds, the same each run.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}

MEASURE = """
import sys
import attnlab.interop.gguf as gguf_module
import attnlab.interop.hf, attnlab.interop.llama, attnlab.interop.hf_tokenizer
import transformers.models.gpt2.modeling_gpt2, transformers.models.llama.modeling_llama
from attnlab.interop.checkpoint import read_checkpoint

def held():
    return int(next(line for line in open("/proc/self/status")
                    if line.startswith("VmHWM")).split()[1]) * 1024

read = gguf_module.load_gguf
found = {}

def read_then_reset(path, source):  # VmHWM from here on: the conversion's peak
    hf, tokenizer = read(path, source)
    found["read"] = held()  # the read's peak
    found["params"] = sum(p.numel() for p in hf.parameters())
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return hf, tokenizer

gguf_module.load_gguf = read_then_reset
gguf_module.gguf_source(sys.argv[1], task="lm", model_types=None)  # its imports, before
before = held()
checkpoint = read_checkpoint(sys.argv[1], task="lm")
print(before, found["read"], held(), found["params"],
      sum(p.numel() for p in checkpoint.model.parameters()))
"""


def _write_gpt2(path, tok):
    """A GPT-2 of ``_write_llama``'s width and depth, in llama.cpp's layout, matrices Q8_0."""
    config = transformers.GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=768,
                                     n_layer=8, n_head=12, tie_word_embeddings=True)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in
                  transformers.GPT2LMHeadModel(config).state_dict().items()
                  if k != "lm_head.weight" and not k.endswith((".attn.bias", ".masked_bias"))}
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_context_length(256)
    w.add_embedding_length(768)
    w.add_block_count(8)
    w.add_feed_forward_length(4 * 768)
    w.add_head_count(12)
    w.add_layer_norm_eps(1e-5)
    _add_tokenizer(w, tok, None)
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        key = _gpt2_name(name)
        shape = shape[::-1] if key.endswith(_CONV1D) else shape
        a = rng.standard_normal(shape, dtype=np.float32) * 0.02
        if a.ndim == 2:
            w.add_tensor(key, gguf.quants.quantize(a, Q.Q8_0), raw_dtype=Q.Q8_0)
        else:
            w.add_tensor(key, a)
    return _close(w, path), sum(int(np.prod(s)) for s in shapes.values())


@pytest.mark.parametrize("write", [_write_gpt2, _write_llama], ids=["gpt2", "llama"])
def test_init_from_a_gguf_file_converts_with_its_weights_in_memory_once(write, tmp_path):
    path, count = write(tmp_path / "big-q8_0.gguf", _tokenizer())
    run = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True,
                         text=True, env=os.environ | MALLOC)
    assert run.returncode == 0, run.stderr
    before, read, converted, *params = (int(n) for n in run.stdout.split()[-5:])
    assert params == [count, count]
    if write is _write_llama:
        # read: once (1.0) and the mapped file (0.26), with room for one tensor's dequantising
        assert (read - before) / (4 * count) < 1.6
    # converted: once (1.0), the mapped file (0.26) and one matrix's copy at a time
    assert (converted - before) / (4 * count) < 1.4, (read - before, converted - before, count)
