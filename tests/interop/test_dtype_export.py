"""``attnlab export --hf`` of a run that started from a bfloat16 Llama directory: the dtype of
the written safetensors and config.json's ``dtype`` agree, and follow what the run trained.

A ``--precision bf16-true`` run's weights are bfloat16 values: written as float32 the export
was twice the size of the checkpoint it came from, unsaid. A ``--precision 32`` run's float32
weights stay float32 (bfloat16 would round them). Both say their dtype on the "wrote" line.

Tolerances: the bfloat16 export's weights equal the run's exactly (a bf16 value survives
float32 and back), so transformers' model loaded with ``dtype="auto"`` (bfloat16) gives the
same logits as attnlab's model cast to bfloat16 within one bfloat16 step at these logits'
size (atol = rtol = 1e-2); loaded in float32, and the float32 export, within float32's
rounding (atol = rtol = 1e-4).
"""
import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch.testing import assert_close

from .conftest import transformers  # (skips without the hf extra)
from .test_checkpoint import CORPUS
from .test_llama_family import save_family

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402

pytestmark = pytest.mark.slow  # each test trains a run

F32 = dict(atol=1e-4, rtol=1e-4)
BF16 = dict(atol=1e-2, rtol=1e-2)


def _stored_dtypes(path):
    """The dtypes a safetensors file stores its tensors in, by safetensors' names (BF16)."""
    with safe_open(path, "pt") as f:
        return {f.get_slice(k).get_dtype() for k in f.keys()}


def _trained_and_exported(tmp_path, capsys, precision, *flags, init_dtype=torch.bfloat16):
    d = save_family(tmp_path / "init", "llama", dtype=init_dtype)
    (tmp_path / "t.txt").write_text("\n".join(CORPUS))
    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(run), "--max-steps", "2", "--batch-size", "4",
                 "--block-size", "8", "--precision", precision, "--threads", "1", *flags]) == 0
    capsys.readouterr()
    assert main(["export", str(run), "--hf", str(out)]) == 0
    return d, run, out, capsys.readouterr().err


def _ids():
    return torch.randint(0, 120, (2, 12), generator=torch.Generator().manual_seed(1))


def test_a_bf16_true_run_exports_bf16_weights_that_transformers_reads_as_bf16(tmp_path, capsys):
    d, run, out, err = _trained_and_exported(tmp_path, capsys, "bf16-true")
    assert _stored_dtypes(out / "model.safetensors") == {"BF16"}
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    # no bigger than the bf16 checkpoint it started from (before: twice its size)
    assert (out / "model.safetensors").stat().st_size <= (
        d / "model.safetensors").stat().st_size * 1.05
    assert "LlamaForCausalLM; bfloat16 weights; load it with" in err, err
    ours = attnlab.load(run)[0].eval()
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype="auto").eval()
    assert hf.dtype == torch.bfloat16
    hf32 = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():
        assert_close(hf(_ids()).logits, ours.to(torch.bfloat16)(_ids()), **BF16)
        assert_close(hf32(_ids()).logits, ours.float()(_ids()), **F32)


def test_a_float32_run_from_a_bf16_checkpoint_exports_float32_and_says_so(tmp_path, capsys):
    d, run, out, err = _trained_and_exported(tmp_path, capsys, "32")
    assert _stored_dtypes(out / "model.safetensors") == {"F32"}
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    assert "LlamaForCausalLM; float32 weights; load it with" in err, err
    ours = attnlab.load(run)[0].eval()
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype="auto").eval()
    assert hf.dtype == torch.float32
    with torch.no_grad():
        assert_close(hf(_ids()).logits, ours(_ids()), **F32)



@pytest.mark.parametrize("flags, why", [
    (["--lora-rank", "2"], "the merged --lora-rank update is not a bfloat16 value"),
    (["--freeze", "all-but-last-1"], "the weights --freeze froze are float32 values"),
])
def test_a_bf16_true_run_whose_weights_bfloat16_would_round_exports_float32_saying_why(
        flags, why, tmp_path, capsys):
    """A merged LoRA update, and weights frozen from a float32 --init, are not bfloat16
    values: written in float32, and the line says why (it said "float32 weights" alone, where
    the docs promised a bf16-true run bfloat16)."""
    d, run, out, err = _trained_and_exported(tmp_path, capsys, "bf16-true", *flags,
                                             init_dtype=torch.float32)
    assert f"LlamaForCausalLM{', its --lora-rank update merged' if 'lora' in why else ''}; " \
           f"float32 weights ({why}); load it with" in err, err
    assert _stored_dtypes(out / "model.safetensors") == {"F32"}
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype="auto").eval()
    with torch.no_grad():
        assert_close(hf(_ids()).logits, attnlab.load(run)[0].eval()(_ids()), **F32)

def test_a_bf16_true_translate_run_exports_bf16_marian_weights(tmp_path, capsys):
    """Marian's sinusoidal position tables (float32, not bfloat16 values) are never written
    (``_keys_to_ignore_on_save``): weighed all the same, every bf16-true translate run was
    written in float32."""
    from attnlab.interop import to_hf

    from .test_export_decoding import TINY, _pairs

    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "translate", "--data", str(_pairs(tmp_path / "pairs.csv")),
                 "--out", str(run), "--precision", "bf16-true", *TINY]) == 0
    capsys.readouterr()
    assert main(["export", str(run), "--hf", str(out)]) == 0
    assert "MarianMTModel; bfloat16 weights; load it with" in capsys.readouterr().err
    assert _stored_dtypes(out / "model.safetensors") == {"BF16"}
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    ours = attnlab.load(run)[0].eval()
    # what a float32 export holds, rounded to bfloat16: the same bits (nothing was rounded)
    as_float32 = to_hf(ours).state_dict()
    with safe_open(out / "model.safetensors", "pt") as f:
        for key in f.keys():
            assert torch.equal(f.get_tensor(key), as_float32[key].to(torch.bfloat16)), key
    src = torch.randint(4, 16, (2, 7), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(4, 16, (2, 5), generator=torch.Generator().manual_seed(2))
    tgt[:, 0] = 1  # attnlab's sos
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, dtype="auto").eval()
    assert hf.dtype == torch.bfloat16
    hf32 = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():  # float32 first: .to(bfloat16) rounds attnlab's position table too
        assert_close(hf32(input_ids=src, decoder_input_ids=tgt).logits, ours(src, tgt), **F32)
        assert_close(hf(input_ids=src, decoder_input_ids=tgt).logits,
                     ours.to(torch.bfloat16)(src, tgt), **BF16)


def test_a_bf16_true_freeze_runs_checkpoint_exports_the_weights_its_plain_export_does(
        tmp_path, capsys):
    """The checkpoint keeps a bf16-true run's frozen weights exact beside its rounded state
    dict (--resume reads them): ``--checkpoint last`` read the rounded ones, so its export
    (and ``evaluate --checkpoint last``) held weights up to 2e-4 off the run's, said
    bfloat16, where the plain export of the same step said float32."""
    d, run, out, err = _trained_and_exported(tmp_path, capsys, "bf16-true", "--freeze",
                                             "all-but-last-1", init_dtype=torch.float32)
    last = tmp_path / "last"
    assert main(["export", str(run), "--hf", str(last), "--checkpoint", "last"]) == 0
    assert "float32 weights (the weights --freeze froze" in capsys.readouterr().err
    plain, from_last = load_file(out / "model.safetensors"), load_file(last / "model.safetensors")
    assert plain.keys() == from_last.keys()
    for key in plain:
        assert torch.equal(from_last[key], plain[key]), key
