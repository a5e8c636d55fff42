"""A ``.gguf`` file with a SentencePiece tokenizer (``tokenizer.ggml.model`` "llama": scored
pieces, ``<0xNN>`` byte fallback, ``<s>``/``</s>``, as Llama-2 and Mistral files hold it),
where ``test_gguf``'s files hold a byte-level BPE (GPT-2, Llama 3, Qwen2): attnlab's tokenizer
of the file gives the ids ``transformers``' tokenizer of the same file gives (its bos first,
as ``tok(text)``), decodes them to the same text, and ``read_checkpoint`` (``--init``,
``generate``) gives the logits of ``transformers``' reading of the file (atol = rtol = 1e-4,
float32) and the same greedy ids.
"""
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from attnlab.interop.checkpoint import read_checkpoint, read_tokenizer
from attnlab.interop.gguf import gguf_source, load_gguf

from .conftest import transformers
from .gguf_files import _close, _gguf_name, _permute

gguf = pytest.importorskip("gguf")
pytestmark = pytest.mark.slow  # reads a model twice (seconds)

PIECES = ["▁the", "▁cat", "▁sat", "▁on", "▁mat", "▁a", "▁", "t", "h", "e", "c", "a", "s", "o",
          "n", "m", "▁t", "▁c", "▁s", "at", "he", "▁th", "▁ca", "!", "?"]
TEXTS = ["the cat sat on the mat", "hello world!", "mat?", "ünïcode 🐈", "  two  spaces"]


def write_sentencepiece(path, *, add_bos_token=True, add_eos_token=None):
    """A tiny random Llama and its SentencePiece tokenizer, in llama.cpp's layout, at
    ``path``; ``add_bos_token``, ``add_eos_token``: the file's tokenizer.ggml.add_bos_token
    and add_eos_token (None: the key left out, as older converters did)."""
    T = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{i:02X}>" for i in range(256)), *PIECES]
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tokens), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)).eval()
    w = gguf.GGUFWriter(str(path), "llama")
    for add, value in (("context_length", 64), ("embedding_length", 32), ("block_count", 2),
                       ("feed_forward_length", 64), ("head_count", 4), ("head_count_kv", 2),
                       ("layer_norm_rms_eps", hf.config.rms_norm_eps),
                       ("tokenizer_model", "llama"),
                       ("token_list", tokens), ("bos_token_id", 1), ("eos_token_id", 2),
                       ("unk_token_id", 0), ("add_bos_token", add_bos_token),
                       ("add_eos_token", add_eos_token)):
        if value is not None:
            getattr(w, f"add_{add}")(value)
    w.add_token_types([T.UNKNOWN, T.CONTROL, T.CONTROL, *[T.BYTE] * 256,
                       *[T.NORMAL] * len(PIECES)])
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(len(PIECES))])
    for name, value in hf.state_dict().items():
        key, a = _gguf_name(name), value.numpy()
        if key.endswith(("attn_q.weight", "attn_k.weight")):  # llama.cpp's RoPE order
            a = _permute(a, 4 if "attn_q" in key else 2)
        w.add_tensor(key, np.ascontiguousarray(a))
    return _close(w, path)


@pytest.fixture(scope="module")
def sentencepiece(tmp_path_factory):
    return write_sentencepiece(tmp_path_factory.mktemp("sp") / "llama2-style.gguf")


def test_its_ids_and_text_are_transformers_ones(sentencepiece):
    path = Path(sentencepiece)
    theirs = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ours = read_tokenizer(path, task="lm")
    for text in TEXTS:
        ids = theirs(text)["input_ids"]
        assert ids[0] == 1  # <s>, as the file's add_bos_token asks
        assert ours.encode(text, add_special_tokens=True) == ids, text
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True), text
    assert (ours.sos_id, ours.eos_id) == (1, 2)


def test_read_checkpoint_gives_transformers_logits_and_greedy_ids(sentencepiece):
    found = read_checkpoint(sentencepiece, task="lm")
    source = gguf_source(sentencepiece, task="lm", model_types=None)
    hf, tok = load_gguf(source.path, source)
    x = tok("the cat sat", return_tensors="pt")["input_ids"]
    assert x[0].tolist() == found.tokenizer.encode("the cat sat", add_special_tokens=True)
    with torch.no_grad():
        assert_close(found.model(x), hf(x).logits, atol=1e-4, rtol=1e-4)
        theirs = hf.generate(x, max_new_tokens=20, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    assert found.model.generate(x, 20).tolist() == theirs.tolist()
