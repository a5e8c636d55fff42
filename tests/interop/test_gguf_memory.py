"""Reading a large ``.gguf`` file holds its weights in memory once: ``load_gguf`` fills an
empty ``transformers`` model with the tensors the reader dequantised (one at a time, from the
memory-mapped file), rather than building a randomly initialised model and copying them in
(twice the weights at the peak, and the random initialisation's time).

The file: a Llama of 53M parameters (213 MB in float32) in Q8_0 (56 MB), its tensors random,
written with ``gguf.GGUFWriter`` beside ``test_gguf``'s byte-level BPE. Measured in a fresh
interpreter: the peak of its resident memory (VmHWM) during ``load_gguf`` less what it held
before (the interpreter, torch, transformers' Llama module, the file's header). The file's
mapped pages count in it too (0.26 of the float32 weights for Q8_0). The conversion of that
model to attnlab's, as ``read_checkpoint`` does it (``--init FILE.gguf``), is measured in the
same interpreter, from the same baseline, with VmHWM reset once the file is read (writing 5 to
``/proc/self/clear_refs``): the file is read and dequantised once for both.
"""
import subprocess
import sys

import numpy as np
import pytest
import torch

from .conftest import transformers
from .gguf_files import Q, _add_tokenizer, _close, _gguf_name
from .test_generate_chat import _tokenizer

gguf = pytest.importorskip("gguf")

MEASURE = """
import sys
import transformers.models.llama.modeling_llama  # imported before the baseline
from attnlab.interop.gguf import gguf_source, load_gguf
from attnlab.interop.llama import causal_lm_of

def held():
    return int(next(line for line in open("/proc/self/status")
                    if line.startswith("VmHWM")).split()[1]) * 1024

source = gguf_source(sys.argv[1], task="lm", model_types=None)
before = held()
hf, _ = load_gguf(source.path, source)
read = held()
params = sum(p.numel() for p in hf.parameters())
with open("/proc/self/clear_refs", "w") as f:  # VmHWM from here on: the conversion's peak
    f.write("5")
model = causal_lm_of(hf, release=True)  # as read_checkpoint converts a GGUF file's model
print(before, read, held(), params, sum(p.numel() for p in model.parameters()))
"""


def _write_big(path, tok):
    config = transformers.LlamaConfig(
        vocab_size=len(tok), max_position_embeddings=256, hidden_size=768,
        intermediate_size=2048, num_hidden_layers=8, num_attention_heads=12,
        num_key_value_heads=4, tie_word_embeddings=False)
    with torch.device("meta"):  # its names and shapes, no memory
        shapes = {k: tuple(v.shape) for k, v in
                  transformers.LlamaForCausalLM(config).state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(768)
    w.add_block_count(8)
    w.add_feed_forward_length(2048)
    w.add_head_count(12)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    _add_tokenizer(w, tok, None)
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        a = rng.standard_normal(shape, dtype=np.float32) * 0.02
        if a.ndim == 2:
            w.add_tensor(_gguf_name(name), gguf.quants.quantize(a, Q.Q8_0), raw_dtype=Q.Q8_0)
        else:
            w.add_tensor(_gguf_name(name), np.ones(shape, np.float32))
    return _close(w, path), sum(int(np.prod(s)) for s in shapes.values())


@pytest.fixture(scope="module")
def peaks(tmp_path_factory):
    """The peaks of a fresh interpreter's resident memory (VmHWM, less what it held before)
    while ``load_gguf`` reads the file and then while the model read is converted to
    attnlab's, in units of the float32 weights: one read of the file for both."""
    path, count = _write_big(tmp_path_factory.mktemp("gguf") / "big-q8_0.gguf", _tokenizer())
    run = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    before, read, converted, *params = (int(n) for n in run.stdout.split()[-5:])
    assert params == [count, count]
    return (read - before) / (4 * count), (converted - before) / (4 * count)


@pytest.mark.slow
def test_a_quantised_file_is_read_with_its_weights_in_memory_once(peaks):
    # once (1.0) and the mapped file (0.26), with room for one tensor's dequantising; a random
    # model and the reader's copy of every tensor besides it were 2.3
    assert peaks[0] < 1.6


@pytest.mark.slow
def test_a_file_converted_for_init_holds_its_weights_in_memory_once(peaks):
    """``read_checkpoint`` (``--init FILE.gguf``, ``generate FILE.gguf``) gives the
    ``transformers`` model read from the file up tensor by tensor as attnlab's ``CausalLM``
    takes its tensors (``llama.causal_lm_of(..., release=True)``): the weights once (1.0) and
    the stacked q/k/v projections. The conversion that built a second float32 copy beside
    it (``causal_lm_of(hf)``) measured 1.8 here."""
    assert peaks[1] < 1.4
