"""A run trained from ``--init DIR`` keeps DIR's eos ids (``generation_config.json``: Llama 3
Instruct lists three, Qwen2.5 two) in its tokenizer. A chat stopped at them, but ``generate RUN
--prompt`` and ``predict`` stopped only at the tokenizer's own eos and generated on past them,
and the run's export told transformers' ``generate`` the tokenizer's eos alone."""
import torch

from attnlab.models import CausalLM
from attnlab.tasks.lm.continuation import continue_prompt, text_stops
from attnlab.tokenizers import CharTokenizer


def _model_and_tokenizer():
    torch.manual_seed(0)
    tok = CharTokenizer.fit(["the cat sat on the mat"])
    lm = CausalLM(tok.vocab_size, model_dim=16, num_heads=2, num_layers=1, dim_feedforward=32,
                  max_len=32).eval()
    return lm, tok


def test_a_continuation_stops_at_each_eos_id_of_the_checkpoint():
    lm, tok = _model_and_tokenizer()
    ids = tok.encode("the cat")
    with torch.no_grad():
        first = int(lm(torch.tensor([ids]))[0, -1].argmax())
    assert first != tok.eos_id  # (else the two answers below are the same)
    plain = continue_prompt(lm, tok, ids, 6)
    assert plain and len(plain) == 6  # the tokenizer's eos alone: it goes on
    tok.checkpoint_eos_ids = [first]  # as HFTokenizer holds what --init's directory names
    assert continue_prompt(lm, tok, ids, 6) == ""
    assert text_stops(tok) == [first, tok.eos_id]


def test_a_tokenizer_without_checkpoint_ids_stops_at_its_own_eos_alone():
    _, tok = _model_and_tokenizer()
    assert text_stops(tok) == [tok.eos_id]
