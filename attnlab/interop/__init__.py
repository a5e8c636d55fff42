"""Weight conversion from and to Hugging Face ``transformers`` (imported lazily: the ``hf`` extra).

    from_hf(hf_model)   GPT2LMHeadModel -> CausalLM; BertModel & BERT-family -> BertEncoder
                        MarianMTModel -> Seq2SeqTransformer
    to_hf(model)        CausalLM -> GPT2LMHeadModel (pre-LN, learned positions, biases)
                        Seq2SeqTransformer -> MarianMTModel (post-LN, sinusoidal positions)
    checkpoint.read_checkpoint(path, task=...)
                        a Hugging Face directory on disk -> attnlab model + its own tokenizer
"""
from .hf import from_hf, to_hf

__all__ = ["from_hf", "to_hf"]
