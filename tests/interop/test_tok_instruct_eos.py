"""Instruction fine-tuning on plain rows (``train lm --instruction plain --init ...``): each
example is the prompt as ``generate`` reads it, the response, and the checkpoint's eos, which
ends the example exactly once, also for a tokenizer that puts an eos after every text
(``add_eos_token``: a Llama tokenizer that asks for it, a GGUF file's
``tokenizer.ggml.add_eos_token``); the response's ids are those of the row's text.
"""
import pytest

from attnlab.interop.hf_tokenizer import HFTokenizer
from attnlab.tasks.lm.continuation import prompt_ids
from attnlab.tasks.lm.instruct import _plain_split, plain_example

from .test_tok_streaming import sentencepiece

# (prompt, response): the response read apart, and read with the prompt (no space between
# them: a SentencePiece response encoded alone would start with one)
ROWS = [("the cat", " sat on the mat"), ("the cat ", "sat"), ("mat?", "the cat")]


@pytest.mark.parametrize("add_eos_token", [False, True])
def test_a_plain_example_ends_with_the_eos_once(add_eos_token):
    tok = HFTokenizer.from_transformers(sentencepiece(add_eos_token=add_eos_token))
    for prompt, response in ROWS:
        asked, answer = _plain_split(tok, prompt, response)
        # the prompt as generate reads it (its eos, with add_eos_token), whichever way it is
        # split; a prompt's last space is read in the response's first token ("▁sat")
        read = prompt_ids(tok, prompt.rstrip(" "))
        assert asked == read, (prompt, response)
        ids, labels = plain_example(asked, answer, tok.eos_id)
        assert ids[-1] == tok.eos_id and ids[-2] != tok.eos_id, (prompt, response, ids)
        assert labels[-1] == tok.eos_id and labels[-2] != tok.eos_id, (prompt, response)
        answered = [i for i in labels if i >= 0]
        assert tok.decode(answered).strip() == response.strip(), (prompt, response)
        assert tok.decode(ids) == prompt + response, (prompt, response)
    assert tok.trailing_ids == ([tok.eos_id] if add_eos_token else [])
