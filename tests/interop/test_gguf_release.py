"""``from_hf(hf, release=True)`` (``llama.causal_lm_of(hf, release=True)`` for the Llama
family), which ``read_checkpoint`` of a ``.gguf`` file (``--init FILE.gguf``) converts with, the
``transformers`` model read from the file given up tensor by tensor as attnlab's takes its
tensors (``test_gguf_memory_init`` measures the memory it saves): the
same model as a plain conversion, within float32 rounding (atol = rtol = 1e-5). GPT-2's Conv1D
weights are read whether stored as (in, out) or, as transformers' GGUF reader gives them, as
the transpose of an (out, in) matrix.
"""
import pytest
import torch

from attnlab.interop import from_hf

transformers = pytest.importorskip("transformers")


def _qwen2():
    config = transformers.Qwen2Config(vocab_size=90, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, tie_word_embeddings=True)
    return transformers.Qwen2ForCausalLM(config)


def _gpt2(tied, conv1d_transposed):
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=90, n_positions=16, n_embd=32, n_layer=2, n_head=4,
        tie_word_embeddings=tied))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.normal_(0, 0.2)  # (biases and norms too, so each is checked)
            if conv1d_transposed and p.ndim == 2 and ".h." in name:
                p.data = p.data.T.contiguous().T  # as load_gguf's model holds them
    return hf


MODELS = {"qwen2-tied": _qwen2, "gpt2-tied-as-gguf": lambda: _gpt2(True, True),
          "gpt2-untied-as-gguf": lambda: _gpt2(False, True),
          "gpt2-untied-as-saved": lambda: _gpt2(False, False)}


@pytest.mark.parametrize("build", MODELS.values(), ids=MODELS.keys())
def test_the_converted_model_gives_the_logits_of_the_model_it_emptied(build):
    """``release=True``: the same CausalLM as a plain conversion, and the Hugging Face model
    it was read from left without its weights (not silently usable)."""
    torch.manual_seed(0)
    hf = build().eval()
    x = torch.randint(0, 90, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = hf(x).logits
        kept = from_hf(hf).eval()(x)
        ours = from_hf(hf, release=True).eval()
        torch.testing.assert_close(kept, theirs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours(x), theirs, atol=1e-5, rtol=1e-5)
    assert ours.config["tie_weights"] is hf.config.tie_word_embeddings
    assert all(p.numel() == 0 for p in hf.parameters())


def test_release_of_a_model_it_does_not_empty_is_refused():
    bert = transformers.BertModel(transformers.BertConfig(
        vocab_size=90, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64))
    with pytest.raises(ValueError, match="release=True is for gpt2, llama.*not 'bert'"):
        from_hf(bert, release=True)
