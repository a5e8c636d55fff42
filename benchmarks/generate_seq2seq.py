"""Encoder–decoder greedy decoding speed: attnlab Seq2SeqTransformer with and without the KV
cache, against Hugging Face ``generate`` on a same-sized random BART, in this process.

Both models are random, built from configs (no download): width 256, 4 heads, 3 encoder + 3
decoder layers, feed-forward 1024, vocabulary 1000, a 24-token source. Each generates exactly
--new-tokens tokens (EOS disabled: attnlab gets an EOS id it never emits, BART
``min_new_tokens``), greedy, at batch 1 and 16, with the same ``torch.set_num_threads``. Prints
new tokens/s (B x new tokens / seconds, best of --repeats) and the ratios; then beam search
(4 beams) for both at batch 1.

Then the same weights on both sides: a random ``MarianMTModel`` of the same size (post-LN,
sinusoidal positions, swish, √D-scaled tied embeddings, as opus-mt) converted with
``attnlab.interop.from_hf``; greedy with the cache, EOS switched off on both (Marian's
generation config gets no EOS id, attnlab an id it never emits), the two run in turns; prints
tokens/s, the ratio and whether the tokens are the same.

    python -m benchmarks.generate_seq2seq [--threads 1] [--repeats 3] [--new-tokens 64] [--quick]
"""
from __future__ import annotations

import argparse
import time

import torch

WIDTH, HEADS, LAYERS, FFN, VOCAB, SRC_LEN = 256, 4, 3, 1024, 1000, 24


def timed(fn, repeats: int) -> float:
    fn()  # warm-up (allocator, kernels)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def build():
    import transformers
    from transformers import BartConfig, BartForConditionalGeneration

    from attnlab.models import Seq2SeqTransformer

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    ours = Seq2SeqTransformer(VOCAB, VOCAB, model_dim=WIDTH, num_heads=HEADS, num_layers=LAYERS,
                              dim_feedforward=FFN, dropout=0.0).eval()
    hf = BartForConditionalGeneration(BartConfig(
        vocab_size=VOCAB, d_model=WIDTH, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN, max_position_embeddings=512, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1, forced_eos_token_id=None)).eval()
    return ours, hf


def build_marian():
    """A random MarianMTModel of the benchmark's size and its attnlab conversion."""
    from transformers import MarianConfig, MarianMTModel

    from attnlab.interop import from_hf

    torch.manual_seed(0)
    hf = MarianMTModel(MarianConfig(
        vocab_size=VOCAB, d_model=WIDTH, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN, max_position_embeddings=512, activation_function="swish",
        scale_embedding=True, pad_token_id=VOCAB - 1, decoder_start_token_id=VOCAB - 1,
        eos_token_id=0, forced_eos_token_id=None)).eval()
    hf.generation_config.eos_token_id = None  # exactly max_new_tokens, no suppression
    return from_hf(hf).eval(), hf


def same_weights(args) -> None:
    from benchmarks.generate_lm import timed_alternating

    ours, hf = build_marian()
    n = args.new_tokens
    print(f"same weights: HF MarianMTModel vs attnlab from_hf ({n} new tokens, greedy, cached)")
    print(f"{'B':>3} {'hf tok/s':>9} {'ours tok/s':>10} {'ratio':>6} {'same':>5}")
    with torch.inference_mode():
        for B in args.batches:
            src = torch.randint(1, VOCAB - 1, (B, SRC_LEN))
            seconds, outs = timed_alternating({
                "hf": lambda: hf.generate(input_ids=src, attention_mask=torch.ones_like(src),
                                          max_new_tokens=n, do_sample=False, num_beams=1),
                "ours": lambda: ours.generate(src, n, eos_token_id=-1)}, args.repeats)
            print(f"{B:>3} {B * n / seconds['hf']:>9.0f} {B * n / seconds['ours']:>10.0f} "
                  f"{seconds['hf'] / seconds['ours']:>6.2f} "
                  f"{str(torch.equal(outs['hf'], outs['ours'])):>5}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--quick", action="store_true", help="16 new tokens, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.new_tokens, args.repeats = 16, 1
    torch.set_num_threads(args.threads)
    ours, hf = build()
    n = args.new_tokens
    ours_params = sum(p.numel() for p in ours.parameters())
    hf_params = sum(p.numel() for p in hf.parameters())
    print(f"torch {torch.__version__}, {args.threads} thread(s); parameters: attnlab "
          f"{ours_params:,}, BART {hf_params:,}; {n} new tokens, source length {SRC_LEN}")

    def run_ours(src, use_cache, beams=1):
        return ours.generate(src, n, num_beams=beams, eos_token_id=-1, use_cache=use_cache)

    def run_hf(src, use_cache, beams=1):
        return hf.generate(input_ids=src, attention_mask=torch.ones_like(src), max_new_tokens=n,
                           min_new_tokens=n, do_sample=False, num_beams=beams, use_cache=use_cache)

    print(f"{'B':>3} {'decoder':<22} {'tokens/s':>10} {'vs attnlab cached':>18}")
    with torch.inference_mode():
        for B in args.batches:
            src = torch.randint(3, VOCAB, (B, SRC_LEN))
            assert run_ours(src, True).tolist() == run_ours(src, False).tolist()
            rows = [("attnlab, KV cache", lambda: run_ours(src, True)),
                    ("attnlab, no cache", lambda: run_ours(src, False)),
                    ("HF BART, KV cache", lambda: run_hf(src, True)),
                    ("HF BART, no cache", lambda: run_hf(src, False))]
            base = None
            for name, fn in rows:
                tps = B * n / timed(fn, args.repeats)
                base = base or tps
                print(f"{B:>3} {name:<22} {tps:>10.0f} {tps / base:>17.2f}x", flush=True)
        src = torch.randint(3, VOCAB, (1, SRC_LEN))
        for name, fn in (("attnlab, 4 beams", lambda: run_ours(src, True, 4)),
                         ("HF BART, 4 beams", lambda: run_hf(src, True, 4))):
            print(f"{1:>3} {name:<22} {n / timed(fn, args.repeats):>10.0f}", flush=True)
    same_weights(args)


if __name__ == "__main__":
    main()
