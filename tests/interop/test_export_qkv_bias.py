"""``attnlab export --hf`` of an lm run with q/k/v biases alone (``--arch llama --qkv-bias``):
transformers reads every ``qwen2`` directory's tokenizer as its own ``Qwen2Tokenizer``
(whatever tokenizer_config.json names), which gives a run's own tokenizer other ids, so such a
run is written as ``LlamaForCausalLM`` with ``attention_bias`` and zero o_proj biases, whose
tokenizer transformers reads as written: its ids and logits are the run's. attnlab reads that
directory back (``generate``, ``train lm --init``, ``from_hf``), its o_proj biases checked zero."""
import pytest
import torch
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.interop.checkpoint import read_checkpoint

from .test_llama_family import save_family

STEPS = ["--max-steps", "3", "--warmup", "1", "--model-dim", "16", "--num-layers", "1",
         "--batch-size", "8", "--threads", "1", "--num-heads", "2", "--dim-feedforward", "32"]
# years and other numbers (Qwen2Tokenizer splits digits one by one), decomposed accents, an
# indented line
TEXT = ("we went home in 2024. the quick brown fox jumps over the lazy dog in 1999, "
        "cafe\u0301 and 12 more.\n    x = 3\n") * 30
TEXTS = ["we went home in 2024.", "the lazy dog", "cafe\u0301 in 1999", "\n    x",
         "  two  spaces\tand a tab"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("qkv") / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _train(text_file, run, *extra):
    assert main(["train", "lm", "--data", str(text_file), "--block-size", "16",
                 "--out", str(run), *STEPS, "--arch", "llama", "--qkv-bias", *extra]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_a_qkv_bias_run_exports_with_its_tokenizers_ids_and_its_logits(kind, text_file,
                                                                         tmp_path, capsys):
    """A char or word run (char is the default tokenizer) was refused with a long message
    that named no remedy; a BPE run was written as Qwen2 and AutoTokenizer gave other ids for
    "we went home in 2024.", in silence."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run, out = tmp_path / "run", tmp_path / "hf"
    sizes = ["--vocab-size", "300"] if kind == "bpe" else []
    _train(text_file, run, "--tokenizer", kind, *sizes)
    assert main(["export", str(run), "--hf", str(out)]) == 0
    assert "(LlamaForCausalLM; float32 weights; load it with" in capsys.readouterr().err
    ours, tokenizer = attnlab.load(run)
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    assert hf.config.attention_bias and not hf.config.mlp_bias
    hf_tokenizer = AutoTokenizer.from_pretrained(out)
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert hf_tokenizer(text)["input_ids"] == ids, text
        x = torch.tensor([ids[:16]])  # within the 16 positions
        with torch.no_grad():  # the weights are copied: float32 rounding only
            assert_close(hf(x).logits, ours(x), atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_qkv_bias_with_a_sliding_window_is_refused_in_one_line(text_file, tmp_path, capsys):
    """No Hugging Face family holds both for a run's own tokenizer (Llama has no window,
    Mistral no biases, and Qwen2's directory reads its tokenizer as Qwen2's)."""
    run, out = tmp_path / "run", tmp_path / "hf"
    _train(text_file, run, "--sliding-window", "8")
    capsys.readouterr()
    assert main(["export", str(run), "--hf", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "--qkv-bias" in err and "--sliding-window" in err and str(run) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_to_hf_writes_qkv_biases_as_llamas_attention_bias_with_the_same_logits():
    """``qkv_bias_as="llama"``: every bias copied (drawn away from zero here), o_proj's zero,
    the logits equal within float32 rounding; a sliding window beside them is refused."""
    from attnlab.interop import to_hf
    from attnlab.models import CausalLM

    parts = dict(positional="rope", norm="rms", ff="swiglu", bias=False, qkv_bias=True)
    ours = CausalLM(80, model_dim=32, num_heads=4, num_layers=2, num_kv_heads=2, max_len=64,
                    **parts).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.2)
    hf = to_hf(ours, qkv_bias_as="llama").eval()
    assert type(hf).__name__ == "LlamaForCausalLM"
    assert hf.config.attention_bias and not hf.config.mlp_bias
    assert all(not layer.self_attn.o_proj.bias.any() for layer in hf.model.layers)
    x = torch.randint(0, 80, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert_close(hf(x).logits, ours(x), atol=1e-5, rtol=1e-5)
    assert type(to_hf(ours)).__name__ == "LlamaForCausalLM"  # the default: any tokenizer
    assert type(to_hf(ours, qkv_bias_as="qwen2")).__name__ == "Qwen2ForCausalLM"
    with pytest.raises(ValueError, match=r"qkv_bias_as='llama' with q/k/v biases alone "
                                         r"\(qkv_bias=True\) and sliding_window=8"):
        to_hf(CausalLM(80, model_dim=32, num_heads=4, sliding_window=8, **parts),
              qkv_bias_as="llama")


@pytest.mark.slow
def test_attnlab_reads_its_own_qkv_bias_export_back(text_file, tmp_path, capsys):
    """The export was refused by generate, train --init and from_hf in one line ("attention_bias
    True with mlp_bias False"): the user could not fine-tune or generate from it."""
    from transformers import AutoModelForCausalLM

    run, out = tmp_path / "run", tmp_path / "hf"
    _train(text_file, run)  # char, the default tokenizer
    assert main(["export", str(run), "--hf", str(out)]) == 0
    prompt = ["--prompt", "we went", "--greedy", "--max-new-tokens", "12"]
    capsys.readouterr()
    assert main(["generate", str(run), *prompt]) == 0
    from_run = capsys.readouterr().out
    assert main(["generate", str(out), *prompt]) == 0
    assert capsys.readouterr().out == from_run and from_run.strip()
    ours, tokenizer = attnlab.load(run)
    x = torch.tensor([tokenizer.encode("we went home in 2024.")[:16]])
    read = read_checkpoint(out, task="lm").model.eval()  # the direct reader
    converted = attnlab.interop.from_hf(AutoModelForCausalLM.from_pretrained(out)).eval()
    with torch.no_grad():  # the weights are copied: float32 rounding only
        assert_close(read(x), ours(x), atol=1e-5, rtol=1e-5)
        assert_close(converted(x), ours(x), atol=1e-5, rtol=1e-5)
    assert main(["train", "lm", "--init", str(out), "--data", str(text_file), "--out",
                 str(tmp_path / "tuned"), "--max-steps", "1", "--block-size", "16",
                 "--batch-size", "8", "--threads", "1"]) == 0
    assert (tmp_path / "tuned" / "metrics.json").exists()


NOT_ZERO = "model.layers.0.self_attn.o_proj.bias is not zero"


def _refused_before_the_run(d, tmp_path, capsys):
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "t.txt"),
                 "--out", str(out), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and NOT_ZERO in err[0] and str(d) in err[0], err
    assert not out.exists()


def test_a_llama_dir_whose_o_proj_bias_is_not_zero_is_refused_naming_it(tmp_path, capsys):
    """attnlab's q/k/v biases alone have no output bias: Llama's attention_bias without
    mlp_bias is read only when every o_proj bias is zero, else refused in one line naming the
    tensor, before a run directory exists; with them zero the logits are transformers'."""
    from transformers import AutoModelForCausalLM

    d = save_family(tmp_path / "llama", "llama", attention_bias=True, mlp_bias=False)
    name = NOT_ZERO
    _refused_before_the_run(d, tmp_path, capsys)
    assert main(["generate", str(d), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0] and str(d) in err[0], err
    hf = AutoModelForCausalLM.from_pretrained(d).eval()
    with pytest.raises(ValueError, match=name):
        attnlab.interop.from_hf(hf)
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.o_proj.bias.zero_()
    hf.save_pretrained(d)
    x = torch.randint(0, 120, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = hf(x).logits
        assert_close(attnlab.interop.from_hf(hf)(x), theirs, atol=1e-5, rtol=1e-5)
        assert_close(read_checkpoint(d, task="lm").model.eval()(x), theirs, atol=1e-5,
                     rtol=1e-5)


def test_a_pytorch_model_bin_whose_o_proj_bias_is_not_zero_is_refused_before_the_run(
        tmp_path, capsys):
    """transformers reads a pytorch_model.bin: the run directory was made (and removed) before
    the refusal; now it is refused from the files, as safetensors are."""
    from safetensors.torch import load_file

    d = save_family(tmp_path / "llama", "llama", attention_bias=True, mlp_bias=False)
    torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    _refused_before_the_run(d, tmp_path, capsys)
