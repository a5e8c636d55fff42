"""``to_hf`` from Python, the model saved beside ``to_hf_tokenizer`` of the run's own char,
word or BPE tokenizer: ``AutoTokenizer`` and ``AutoModelForCausalLM`` read from the directory
give attnlab's ids and logits, for every family a CausalLM exports as. transformers reads
every ``qwen2`` directory's tokenizer as ``Qwen2Tokenizer`` whatever it holds, so q/k/v biases
alone go as Llama's ``attention_bias`` by default (``qwen2`` only when asked)."""
import pytest
import torch
from torch.testing import assert_close

from attnlab.interop import to_hf
from attnlab.interop.tokenizer import special_ids, to_hf_tokenizer
from attnlab.models import CausalLM
from attnlab.tokenizers import BPETokenizer, CharTokenizer, WordTokenizer

TEXTS = ["we went home in 2024. the lazy dog", "the quick brown fox, cafe\u0301"] * 20
TEXT = "we went home in 2024. the lazy dog"
LLAMA = dict(positional="rope", norm="rms", ff="swiglu", bias=False)
FAMILIES = {"gpt2": dict(positional="learned", norm_first=True), "llama": LLAMA,
            "qkv-bias": dict(LLAMA, qkv_bias=True), "qk-norm": dict(LLAMA, qk_norm=True),
            "window": dict(LLAMA, sliding_window=8)}
TOKENIZERS = {"char": lambda: CharTokenizer.fit(TEXTS), "word": lambda: WordTokenizer.fit(TEXTS),
              "bpe": lambda: BPETokenizer.fit(TEXTS, vocab_size=300)}


def _export(model, tokenizer, d):
    hf = to_hf(model, **special_ids(tokenizer))
    hf.save_pretrained(d)
    to_hf_tokenizer(tokenizer).save_pretrained(d)
    return type(hf).__name__


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", TOKENIZERS)
def test_a_saved_export_reads_back_with_the_runs_ids_and_logits(family, kind, tmp_path):
    """A q/k/v-bias model was written as Qwen2 and AutoTokenizer gave [9] for the six ids
    of a word tokenizer's "we went home in 2024.", in silence."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = TOKENIZERS[kind]()
    ours = CausalLM(tokenizer.vocab_size, model_dim=16, num_heads=2, num_layers=1, max_len=64,
                    **FAMILIES[family]).eval()
    with torch.no_grad():  # (away from the zero biases a fresh model starts with)
        for p in ours.parameters():
            p.normal_(0, 0.2)
    _export(ours, tokenizer, tmp_path)
    ids = tokenizer.encode(TEXT)
    assert AutoTokenizer.from_pretrained(tmp_path)(TEXT)["input_ids"] == ids
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    x = torch.tensor([ids])
    with torch.no_grad():  # the weights are copied: float32 rounding only
        assert_close(theirs(x).logits, ours(x), atol=1e-5, rtol=1e-5)


def test_q_k_v_biases_go_as_llamas_by_default_so_a_word_tokenizer_reads_back(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = WordTokenizer.fit(TEXTS)
    ours = CausalLM(tokenizer.vocab_size, model_dim=16, num_heads=2, num_layers=1,
                    **FAMILIES["qkv-bias"])
    assert _export(ours, tokenizer, tmp_path) == "LlamaForCausalLM"
    read = AutoTokenizer.from_pretrained(tmp_path)
    assert read(TEXT)["input_ids"] == tokenizer.encode(TEXT)
