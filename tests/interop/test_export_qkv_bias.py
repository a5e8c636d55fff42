"""``attnlab export --hf`` of an lm run with q/k/v biases alone (``--arch llama --qkv-bias``):
transformers reads every ``qwen2`` directory's tokenizer as its own ``Qwen2Tokenizer``
(whatever tokenizer_config.json names), which gives a run's own tokenizer other ids, so such a
run is written as ``LlamaForCausalLM`` with ``attention_bias`` and zero o_proj biases, whose
tokenizer transformers reads as written: its ids and logits are the run's."""
import pytest
import torch
from torch.testing import assert_close

import attnlab
from attnlab.cli import main

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
    assert "(LlamaForCausalLM; load it with" in capsys.readouterr().err
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
    assert type(to_hf(ours)).__name__ == "Qwen2ForCausalLM"  # the default: Qwen2's
    with pytest.raises(ValueError, match=r"\(--qkv-bias\) with a sliding window "
                                         r"\(--sliding-window\) fit no Hugging Face family"):
        to_hf(CausalLM(80, model_dim=32, num_heads=4, sliding_window=8, **parts),
              qkv_bias_as="llama")
