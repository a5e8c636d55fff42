"""``attnlab generate`` prints a continuation as it is decoded (``StopStreamer``): the pieces
it prints, joined, are the text the tokenizer decodes of all the ids at once, for byte-level
BPE (GPT-2's, Llama 3's, Qwen's: bytes of one character spread over several tokens) and for
SentencePiece with byte fallback (Llama 2's, Mistral's, a GGUF file's ``<0xNN>`` pieces, which
``tokenizers`` decodes a run at a time: a run that is no UTF-8 is one U+FFFD per byte, so a
byte that read as itself alone turns to U+FFFD when the next byte comes). Random ids, seeded.
"""
import random

import pytest

from attnlab.interop.hf_tokenizer import HFTokenizer
from attnlab.tasks.lm.continuation import AfterPrompt, StopStreamer
from attnlab.tokenizers import BPETokenizer

from .conftest import transformers
from .test_generate_chat import _tokenizer as byte_level_tokenizer
from .test_gguf_sentencepiece import PIECES

SEQUENCES = 300  # random id sequences per tokenizer


def sentencepiece(**options):
    """A Llama 2 layout (transformers' ``LlamaTokenizer``, as it reads a GGUF file's
    SentencePiece vocabulary, with ``options``): ``<s>``, ``</s>``, 256 byte pieces, a few
    words."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import get_merges

    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{i:02X}>" for i in range(256)), *PIECES]
    scores = [0.0] * 259 + [-float(i) for i in range(len(PIECES))]
    merges = get_merges({"tokens": tokens, "scores": scores})
    return transformers.LlamaTokenizer(vocab={t: i for i, t in enumerate(tokens)}, merges=merges,
                                       **options)


@pytest.fixture(scope="module", params=["sentencepiece", "byte-level", "attnlab-bpe"])
def tokenizer(request):
    if request.param == "attnlab-bpe":
        return BPETokenizer.fit(["the cat sat on the mat, ünïcode 🐈"], vocab_size=300)
    theirs = sentencepiece() if request.param == "sentencepiece" else byte_level_tokenizer()
    return HFTokenizer.from_transformers(theirs)


def _streamed(stream, ids):
    return "".join([*(stream.add(i) for i in ids), stream.flush()])


def _random_ids(rng, vocab_size):
    # short runs, and byte pieces in most of them (both vocabularies are mostly bytes)
    return [rng.randrange(vocab_size) for _ in range(rng.randrange(1, 12))]


def test_the_streamed_text_is_the_decoded_text_of_all_the_ids(tokenizer):
    rng = random.Random(0)
    for _ in range(SEQUENCES):
        ids = _random_ids(rng, tokenizer.vocab_size)
        assert _streamed(StopStreamer(tokenizer, []), ids) == tokenizer.decode(ids), ids


def test_the_streamed_text_after_a_prompt_is_its_decoded_text(tokenizer):
    rng = random.Random(1)
    prompt = tokenizer.encode("the cat sat")
    for _ in range(SEQUENCES):
        ids = _random_ids(rng, tokenizer.vocab_size)
        after = AfterPrompt(tokenizer, prompt)
        assert _streamed(StopStreamer(after, []), ids) == after.decode(ids), ids


def test_a_byte_that_turns_to_u_fffd_with_the_next_one_is_not_printed_before_it():
    """The case seen: ``<0x12>`` alone reads as the control character U+0012, and ``<0x12>
    <0xC0>`` as two U+FFFD (no UTF-8): the stream printed U+0012 and eleven U+FFFD where the
    decoded text has twelve."""
    tok = HFTokenizer.from_transformers(sentencepiece())
    ids = [tok.tokenizer.token_to_id(f"<0x{b:02X}>") for b in (0x12, 0xC0, 0xF1, 0x31)]
    assert tok.decode(ids[:1]) == "\x12" and tok.decode(ids) == "\ufffd" * 4
    assert _streamed(StopStreamer(tok, []), ids) == "\ufffd" * 4


def _cleaning():
    """A byte-level tokenizer that cleans up decoded text."""
    fast = HFTokenizer.from_transformers(byte_level_tokenizer()).tokenizer
    return HFTokenizer(fast, {}, clean_up_tokenization_spaces=True)


def test_a_text_cleaned_up_as_transformers_cleans_it_is_streamed_as_decoded():
    """A checkpoint that cleans up decoded text (``clean_up_tokenization_spaces``: BERT's
    WordPiece; a BPE one in transformers 4) drops the space before "." or "n't" once they
    come: "a " printed before "." would leave the space in the stream."""
    tok = _cleaning()
    rng = random.Random(2)
    # the case seen: clean-ups chain (" n ' t" -> " n't" -> "n't"), and "it is " was printed
    fixed = ["it is n ' t .", "that ' s it", "we ' re here ."]
    for text in fixed + ["".join(rng.choice([" ", " ", ".", "?", "!", ",", "'", "n", "t", "s",
                                             "m", "v", "e", "r", "a"])
                                 for _ in range(rng.randrange(1, 16))) for _ in range(SEQUENCES)]:
        ids = tok.encode(text)
        assert _streamed(StopStreamer(tok, []), ids) == tok.decode(ids), text
        after = AfterPrompt(tok, tok.encode("the cat"))
        assert _streamed(StopStreamer(after, []), ids) == after.decode(ids), text


def test_the_clean_up_hold_covers_every_chain_of_clean_ups():
    """Every text over a small alphabet: the cleaned text of any start of it, less the last
    ``unsettled_chars``, begins the cleaned text of all of it (what the stream prints is never
    taken back), with clean-ups that chain (" n ' t" -> " n't" -> "n't")."""
    import itertools

    from attnlab.interop.hf_tokenizer import clean_up

    reach = _cleaning().unsettled_chars
    for length in range(1, 7):
        for text in map("".join, itertools.product(" .'nt", repeat=length)):
            whole = clean_up(text)
            for end in range(1, length):
                part = clean_up(text[:end])
                assert whole.startswith(part[:max(0, len(part) - reach)]), (text, end)


def test_ctrl_c_prints_the_held_bytes_decoded_so_far():
    """Ctrl-C while a run of byte pieces is held ("é" is <0xC3> <0xA9>, held until the run
    ends): what was decoded so far is printed before generate stops, not lost."""
    import torch

    from attnlab.tasks.lm.continuation import continue_prompt

    tok = HFTokenizer.from_transformers(sentencepiece())
    held = [tok.tokenizer.token_to_id(f"<0x{b:02X}>") for b in "é".encode()]

    class Interrupted:  # a model that streams the bytes, then is interrupted
        max_len = 32

        def stream(self, ids, max_new_tokens, **options):
            yield from (torch.tensor([[i]]) for i in held)
            raise KeyboardInterrupt

    printed = []
    with pytest.raises(KeyboardInterrupt):
        continue_prompt(Interrupted(), tok, tok.encode("the cat"), 8, write=printed.append)
    assert "".join(printed) == tok.decode(held) == "é"
