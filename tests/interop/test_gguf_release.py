"""``llama.causal_lm_of(hf, release=True)``, which ``read_checkpoint`` of a ``.gguf`` file
(``--init FILE.gguf``) converts with, the ``transformers`` model read from the file given up
tensor by tensor as attnlab's takes its tensors (``test_gguf_memory`` measures the memory it
saves): the same model as a plain conversion, within float32 rounding (atol = rtol = 1e-5).
"""
import torch


def test_the_converted_model_gives_the_logits_of_the_model_it_emptied():
    """``release=True``: the same CausalLM as a plain conversion, and the Hugging Face model
    it was read from left without its weights (not silently usable)."""
    import transformers

    from attnlab.interop.llama import causal_lm_of

    config = transformers.Qwen2Config(vocab_size=90, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, tie_word_embeddings=True)
    hf = transformers.Qwen2ForCausalLM(config).eval()
    x = torch.randint(0, 90, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = hf(x).logits
        kept = causal_lm_of(hf).eval()(x)
        ours = causal_lm_of(hf, release=True).eval()
        torch.testing.assert_close(kept, theirs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours(x), theirs, atol=1e-5, rtol=1e-5)
    assert hf.model.embed_tokens.weight.numel() == 0
