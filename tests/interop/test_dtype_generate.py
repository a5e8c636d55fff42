"""A Llama directory saved in bfloat16 or float16, read as stored (``dtype="auto"``, what
``attnlab generate DIR`` uses): attnlab's model is in the checkpoint's dtype, as transformers'
``from_pretrained(dtype="auto")`` is, its logits equal transformers' in that dtype (atol =
rtol = 1e-2, about one bfloat16 step at these logits' size of 1; they agree bit for bit
here), and ``generate`` writes transformers' greedy text."""
import pytest
import torch
from torch.testing import assert_close

from .conftest import transformers  # (skips without the hf extra)
from .test_llama_family import save_family

from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402

HALF = dict(atol=1e-2, rtol=1e-2)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_directory_generates_as_transformers_in_its_dtype(
        tmp_path, capsys, dtype):
    d = save_family(tmp_path / "llama", "llama", dtype=dtype)
    hf = transformers.AutoModelForCausalLM.from_pretrained(d, dtype="auto").eval()
    ours = read_checkpoint(d, task="lm", dtype="auto").model.eval()
    assert hf.dtype == dtype and {p.dtype for p in ours.parameters()} == {dtype}
    ids = torch.randint(0, 120, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert_close(ours(ids), hf(ids).logits, **HALF)
    tok = transformers.AutoTokenizer.from_pretrained(d)
    prompt = "the cat sat"
    theirs = hf.generate(tok(prompt, return_tensors="pt").input_ids, max_new_tokens=20,
                         do_sample=False, eos_token_id=None)
    capsys.readouterr()
    assert main(["generate", str(d), "--prompt", prompt, "--greedy",
                 "--max-new-tokens", "20", "--threads", "1"]) == 0
    assert capsys.readouterr().out.strip() == tok.decode(theirs[0],
                                                         skip_special_tokens=True).strip()
