"""``attnlab generate DIR`` stops at the tokenizer's eos token, also where neither
generation_config.json nor config.json names an eos id; ``transformers``' ``generate`` stops
only at those, and writes on past it. The stop stays (what follows the eos is no text of the
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


@pytest.mark.slow
def test_the_tokenizers_eos_stops_and_a_note_says_transformers_goes_on(tmp_path, capsys):
    transformers.logging.set_verbosity_error()
    d, model = _gpt2(tmp_path / "noeos", bos_token_id=None, eos_token_id=None)
    tok = transformers.AutoTokenizer.from_pretrained(d)
    ids = tok("the cat", return_tensors="pt").input_ids
    theirs = model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:].tolist()
    assert EOS in theirs and len(theirs) == 12  # transformers wrote on past its eos
    capsys.readouterr()
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy", "--max-new-tokens",
                 "12", "--json", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["text"] == tok.decode(theirs[:theirs.index(EOS)])
    assert "tokenizer's eos token <|endoftext|> (id 0)" in err
    assert "transformers' generate would write on past it" in err


@pytest.mark.slow
def test_no_note_where_the_config_names_the_eos(tmp_path, capsys):
    d, _ = _gpt2(tmp_path / "eos", bos_token_id=EOS, eos_token_id=EOS)
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy", "--max-new-tokens",
                 "12", "--threads", "1"]) == 0
    assert "eos token" not in capsys.readouterr().err
