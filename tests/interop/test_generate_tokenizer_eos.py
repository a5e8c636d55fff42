"""``attnlab generate DIR`` stops at the tokenizer's eos token, also where neither
generation_config.json nor config.json names it (they name no eos id, or another one);
``transformers``' ``generate`` stops only at the ids they name, and writes on past it. The stop stays (what follows the eos is no text of the
prompt) and is said in one note, which a user comparing with ``transformers`` reads. The text
up to the stop is ``transformers``' greedy text up to its first eos (token ids compared)."""
import json

import pytest
import torch

from attnlab.cli import main
from .conftest import transformers
from .test_checkpoint import save_gpt2

EOS = 0  # <|endoftext|>


def _gpt2(d, **eos):
    """A GPT-2 directory whose greedy continuation of "the cat" writes the eos token after a
    few tokens (its embedding row scaled up: the head is tied to it)."""
    torch.manual_seed(4)
    save_gpt2(d, extra_rows=0, **eos)
    model = transformers.GPT2LMHeadModel.from_pretrained(d)
    with torch.no_grad():
        model.transformer.wte.weight[EOS] *= 8
    model.save_pretrained(d)
    return d, model


def _greedy(d, model, capsys):
    """transformers' 12 greedy ids after "the cat", then attnlab's text and stderr."""
    transformers.logging.set_verbosity_error()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    ids = tok("the cat", return_tensors="pt").input_ids
    theirs = model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:].tolist()
    capsys.readouterr()
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy", "--max-new-tokens",
                 "12", "--json", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    return tok, theirs, json.loads(out)["text"], err


@pytest.mark.slow
def test_the_tokenizers_eos_stops_and_a_note_says_transformers_goes_on(tmp_path, capsys):
    d, model = _gpt2(tmp_path / "noeos", bos_token_id=None, eos_token_id=None)
    tok, theirs, text, err = _greedy(d, model, capsys)
    assert EOS in theirs and len(theirs) == 12  # transformers wrote on past its eos
    assert text == tok.decode(theirs[:theirs.index(EOS)])
    assert "tokenizer's eos token <|endoftext|> (id 0)" in err
    assert "transformers' generate would write on past it" in err


@pytest.mark.slow
def test_no_note_where_the_config_names_the_eos(tmp_path, capsys):
    d, _ = _gpt2(tmp_path / "eos", bos_token_id=EOS, eos_token_id=EOS)
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy", "--max-new-tokens",
                 "12", "--threads", "1"]) == 0
    assert "eos token" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_note_where_the_config_names_another_eos(tmp_path, capsys):
    """config.json names eos id 5, the tokenizer's eos is 0: transformers writes past 0 (it
    stops only at 5), attnlab stops at 0 and says so, naming the id the config names."""
    d, model = _gpt2(tmp_path / "other", bos_token_id=EOS, eos_token_id=5)
    tok, theirs, text, err = _greedy(d, model, capsys)
    assert EOS in theirs and 5 not in theirs and len(theirs) == 12
    assert text == tok.decode(theirs[:theirs.index(EOS)])
    assert "tokenizer's eos token <|endoftext|> (id 0)" in err
    assert "not among the eos ids [5]" in err
    assert "transformers' generate would write on past it" in err
