"""Weight conversion from and to Hugging Face ``transformers`` (imported lazily: the ``hf`` extra).

    from_hf(hf_model)   GPT2LMHeadModel -> CausalLM; BertModel & BERT-family -> BertEncoder
                        MarianMTModel -> Seq2SeqTransformer
    to_hf(causal_lm)    CausalLM -> GPT2LMHeadModel (pre-LN, learned positions, biases)
"""
from .hf import from_hf, to_hf

__all__ = ["from_hf", "to_hf"]
