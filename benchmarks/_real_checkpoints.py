"""Real-shaped Llama-family checkpoints for ``benchmarks/llama_real.py``, built here.

Nothing can be downloaded on the benchmark machine, so the two directories are made locally
with ``transformers``' own classes at the published shapes of SmolLM2-135M (Llama) and
Qwen2.5-0.5B (Qwen2), randomly initialised from a fixed seed, saved as bf16 safetensors (the
larger one sharded with its index, as on the Hub) beside a small byte-level BPE tokenizer.
The weights are random: speed and memory depend on the shapes, not on the values.

They are written once under ``$ATTNLAB_BENCH_CACHE`` (default ``~/.cache/attnlab-bench``),
outside git, and reused; a directory is complete when its ``DONE`` file exists.

    python -m benchmarks._real_checkpoints      # build both (a minute or two)
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

# name -> (transformers config class, model class, config keys); the shapes are the Hub
# configs' (HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B)
SHAPES = {
    "smollm2-135m": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
        intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0,
        rms_norm_eps=1e-5, max_position_embeddings=8192, bos_token_id=0, eos_token_id=0)),
    "qwen2.5-0.5b": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
        intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6,
        rms_norm_eps=1e-6, max_position_embeddings=32768, bos_token_id=151643,
        eos_token_id=151643, use_sliding_window=False)),
}
SHARD = {"qwen2.5-0.5b": "400MB"}  # sharded with model.safetensors.index.json, as on the Hub
TEXT = ["the cat sat on the mat and looked at the dog", "a model reads tokens and writes more",
        "attention is all you need, said the paper", "numbers 0 1 2 3 4 5 6 7 8 9 10"] * 20


def cache_dir() -> Path:
    return Path(os.environ.get("ATTNLAB_BENCH_CACHE", "~/.cache/attnlab-bench")).expanduser()


def checkpoint(name: str) -> Path:
    """The directory of the ``name`` checkpoint (``SHAPES``), built when absent."""
    d = cache_dir() / name
    if not (d / "DONE").exists():
        build(name, d)
    return d


def build(name: str, d: Path) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    config_cls, model_cls, keys = SHAPES[name]
    print(f"building {d} ({model_cls}, random weights at the real shape)...", flush=True)
    shutil.rmtree(d, ignore_errors=True)  # a half-written directory of ours (no DONE)
    transformers.logging.disable_progress_bar()
    config = getattr(transformers, config_cls)(**keys)
    config.dtype = torch.bfloat16
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)._from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(d, **({"max_shard_size": SHARD[name]} if name in SHARD else {}))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                         bos_token="<|endoftext|>").save_pretrained(d)
    (d / "DONE").write_text("random weights at the real shape; seed 0\n")


if __name__ == "__main__":
    for each in SHAPES:
        print(checkpoint(each))
