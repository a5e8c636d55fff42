"""GGUF files written here for the interop tests, as llama.cpp writes them: the tokenizer and
chat template in the metadata (``_add_tokenizer``), and a Llama-family model's tensors under
llama.cpp's names, float or block-quantised (``write_llama_gguf``), and a 53M-parameter Llama
of random Q8_0 matrices for the memory tests (``write_big_llama``). Not a test module: the GGUF
tests import it (``gguf`` is skipped where it is not installed)."""
import json
import math

import numpy as np
import pytest
import torch

from .test_generate_chat import CHATML

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType


def _add_tokenizer(w, tok, template):
    vocab = tok.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t.startswith("<|") else gguf.TokenType.NORMAL
                       for t in tokens])
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in merges])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    if template:
        w.add_chat_template(template)


def _close(w, path):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# transformers' names -> llama.cpp's (``blk.N.`` + these inside a block)
_TOP = {"model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
_BLOCK = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
          "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
          "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
          "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def _gguf_name(name):
    if name in _TOP:
        return _TOP[name]
    _, _, block, *rest = name.split(".")
    return f"blk.{block}.{_BLOCK['.'.join(rest[:-1])]}.{rest[-1]}"


def _permute(w, heads, *, inverse=False):
    """llama.cpp's reordering of Llama's q and k rows for its RoPE (convert_hf_to_gguf's
    ``permute``: per head, rows (2, hd/2) read as (hd/2, 2)), or its ``inverse``, which
    transformers' reader applies."""
    split = (w.shape[0] // heads // 2, 2) if inverse else (2, w.shape[0] // heads // 2)
    return w.reshape(heads, *split, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _q4_k_blocks(rows, cols, seed=0):
    """Valid Q4_K bytes for a (rows, cols) matrix (cols a multiple of 256): per block of 256,
    two float16 scales and random 6-bit sub-scales and 4-bit quants (``gguf`` has no Q4_K
    quantiser)."""
    rng = np.random.default_rng(seed)
    blocks = rows * cols // 256
    head = np.tile(np.array([0.004, 0.002], dtype=np.float16).view(np.uint8), (blocks, 1))
    body = rng.integers(0, 256, (blocks, 12 + 128), dtype=np.uint8)
    return np.concatenate([head, body], 1).reshape(rows, cols // 256 * 144)


def rope_freqs(head_dim, rope):
    """llama.cpp's ``rope_freqs`` tensor of llama3 scaling (convert_hf_to_gguf's LlamaModel):
    per frequency, how much the scaling divides it."""
    freqs = 1.0 / rope["rope_theta"] ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)
    L, low, high = (rope["original_max_position_embeddings"], rope["low_freq_factor"],
                    rope["high_freq_factor"])
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < L / high:
            factors.append(1.0)
        elif wavelen > L / low:
            factors.append(rope["factor"])
        else:
            smooth = (L / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / rope["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def write_llama_gguf(path, hf, tok, *, arch, types=None, changed=None, added=None):
    """A Llama-family ``hf`` (LlamaForCausalLM, Qwen3ForCausalLM, ...) and ``tok`` as a GGUF
    file of architecture ``arch``; ``types`` maps a tensor name's ending (``ffn_down.weight``)
    or ``"*"`` (every matrix) to a quantised type; ``changed`` maps ``GGUFWriter`` methods to
    the value the file holds in place of the model's (None: the key left out, as a converter
    that forgot it); ``added`` maps more ``GGUFWriter`` methods to the value they write
    (``{"add_eot_token_id": 7}``). Returns the path and the state dict the file holds, dequantised, in
    transformers' names and order (the reference model's)."""
    c = hf.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    w = gguf.GGUFWriter(str(path), arch)
    for method, value in (changed or {}).items():
        write = getattr(w, method)
        setattr(w, method, lambda *args, write=write, value=value: (
            None if value is None else write(value)))
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    rope = c.rope_parameters or {}
    w.add_rope_freq_base(rope.get("rope_theta", 10000.0))
    if rope.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    elif rope.get("rope_type") == "yarn":  # a kind attnlab refuses
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
    elif rope.get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", rope_freqs(head_dim, rope))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    _add_tokenizer(w, tok, CHATML)
    for method, value in (added or {}).items():
        getattr(w, method)(value)
    stored = {}
    for name, value in hf.state_dict().items():
        if name == "lm_head.weight" and c.tie_word_embeddings:  # llama.cpp writes no output
            stored[name] = stored["model.embed_tokens.weight"]
            continue
        key = _gguf_name(name)
        a = value.numpy().astype(np.float32)
        permuted = arch == "llama" and key.endswith(("attn_q.weight", "attn_k.weight"))
        if permuted:
            heads = c.num_attention_heads if "attn_q" in key else c.num_key_value_heads
            a = _permute(a, heads)
        kind = next((t for end, t in (types or {}).items() if key.endswith(end)),
                    (types or {}).get("*")) if a.ndim == 2 else None
        if kind == Q.Q4_K:
            raw = _q4_k_blocks(*a.shape)
        elif kind is not None:
            raw = gguf.quants.quantize(a, kind)
        if kind is None:
            w.add_tensor(key, np.ascontiguousarray(a))
        else:
            w.add_tensor(key, raw, raw_dtype=kind)
            a = gguf.quants.dequantize(raw, kind)
        if permuted:
            a = _permute(a, heads, inverse=True)  # back to transformers' order
        stored[name] = torch.from_numpy(np.ascontiguousarray(a)).float()
    return _close(w, path), stored


def write_big_llama(path, tok):
    """A Llama of 53M parameters (213 MB in float32) in Q8_0 (56 MB), its matrices random, its
    norms ones, beside ``tok``: its path and parameter count."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=len(tok), max_position_embeddings=256, hidden_size=768,
        intermediate_size=2048, num_hidden_layers=8, num_attention_heads=12,
        num_key_value_heads=4, tie_word_embeddings=False)
    with torch.device("meta"):  # its names and shapes, no memory
        shapes = {k: tuple(v.shape) for k, v in
                  transformers.LlamaForCausalLM(config).state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(768)
    w.add_block_count(8)
    w.add_feed_forward_length(2048)
    w.add_head_count(12)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    _add_tokenizer(w, tok, None)
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        a = rng.standard_normal(shape, dtype=np.float32) * 0.02
        if a.ndim == 2:
            w.add_tensor(_gguf_name(name), gguf.quants.quantize(a, Q.Q8_0), raw_dtype=Q.Q8_0)
        else:
            w.add_tensor(_gguf_name(name), np.ones(shape, np.float32))
    return _close(w, path), sum(int(np.prod(s)) for s in shapes.values())
