"""``--dtype auto`` on a GGUF file is the file's own dtype, as ``from_pretrained(dtype="auto")``
reads a safetensors checkpoint's: a file whose matrices are BF16 (llama.cpp's ``--outtype
bf16``, the norms F32) gives a bfloat16 model, an F16 one float16, where before both came in
float32 (twice the memory, other arithmetic than the file's). An F32 or block-quantised file
(which dequantises to float32) stays float32. The reference is ``transformers``' model of the
same file (its GGUF reader, float32) cast to the file's dtype: logits at atol = rtol = 1e-2
(about one bfloat16 step at these logits' size), greedy text token for token.
"""
import pytest
import torch
from torch.testing import assert_close

from attnlab.cli import main
from attnlab.interop.checkpoint import read_checkpoint
from attnlab.interop.gguf import gguf_source, load_gguf

from .gguf_files import Q, write_llama_gguf
from .test_gguf import PROMPT, files  # noqa: F401 (a fixture)
from .test_gguf_llama import _tiny

pytestmark = pytest.mark.slow  # writes and reads tiny models, runs generate

HALF = dict(atol=1e-2, rtol=1e-2)
KINDS = {"bf16": (Q.BF16, torch.bfloat16), "f16": (Q.F16, torch.float16),
         "q8_0": (Q.Q8_0, torch.float32), "f32": (None, torch.float32)}


@pytest.fixture(scope="module")
def written(files):
    hf = _tiny("LlamaForCausalLM", files["tok"])
    found = {}
    for name, (kind, _) in KINDS.items():
        found[name], _ = write_llama_gguf(files["dir"] / f"dtype-{name}.gguf", hf, files["tok"],
                                          arch="llama", types=kind and {"*": kind})
    return found


@pytest.mark.parametrize("name", sorted(KINDS))
def test_auto_is_the_files_dtype(written, name):
    ours = read_checkpoint(written[name], task="lm", dtype="auto").model
    assert {p.dtype for p in ours.parameters()} == {KINDS[name][1]}
    # training from the file (no dtype asked) starts from float32 weights, as before
    plain = read_checkpoint(written[name], task="lm").model
    assert {p.dtype for p in plain.parameters()} == {torch.float32}


def test_a_bf16_file_generates_as_transformers_in_bfloat16(written, capsys):
    path = written["bf16"]
    source = gguf_source(path, task="lm", model_types=None)
    hf, tok = load_gguf(source.path, source)
    hf = hf.to(torch.bfloat16)
    ours = read_checkpoint(path, task="lm", dtype="auto").model
    ids = torch.randint(0, len(tok), (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert_close(ours(ids), hf(ids).logits, **HALF)
    x = tok(PROMPT, return_tensors="pt")["input_ids"]
    theirs = hf.generate(x, max_new_tokens=20, do_sample=False, eos_token_id=None,
                         pad_token_id=0)
    capsys.readouterr()
    assert main(["generate", str(path), "--prompt", PROMPT, "--greedy", "--max-new-tokens",
                 "20", "--threads", "1"]) == 0
    assert capsys.readouterr().out == tok.decode(theirs[0], skip_special_tokens=True) + "\n"
