"""``attnlab export --hf`` of a translate run bans the pad token in ``generation_config.json``
(``bad_words_ids`` [[pad]], as opus-mt's checkpoints do), as ``attnlab translate`` never
writes it (tests/interop/test_marian_pad_banned.py). Before, ``transformers``' ``generate``
of the export wrote the pad token where it won, which the tokenizer then dropped: a
translation with a word missing and another continuation than ``attnlab translate RUN``'s."""
import json

import pytest
import torch

import attnlab
from attnlab.cli import main

from .conftest import transformers  # noqa: F401  (skips without the hf extra)
from .test_export_decoding import TINY, WORDS, _pairs

PAD = 0  # attnlab's tokenizers: pad 0, sos 1, eos 2, unk 3


def _pad_wins_first(run, text):
    """The run's pad token's output row made that of the token it writes first after
    ``text``, scaled so that the pad token scores above it there (by half its logit):
    wherever that token wins, the pad token would."""
    from safetensors.torch import load_file, save_file

    model, tokenizers = attnlab.load(run)
    with torch.no_grad():
        logits = model(torch.tensor([tokenizers.src.encode(text)]),
                       torch.tensor([[model.sos_id]]))[0, -1]  # (V,)
    first = int(logits.argmax())
    assert first != PAD
    path = run / "model.safetensors"
    weights = load_file(path)
    weights["output.weight"][PAD] = (1.5 if logits[first] > 0 else 0.5) \
        * weights["output.weight"][first]
    save_file(weights, path, metadata={"format": "pt"})


@pytest.mark.slow  # trains a run
def test_transformers_never_writes_the_pad_token_of_an_exported_translate_run(tmp_path,
                                                                              capsys):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "translate", "--data", str(_pairs(tmp_path / "pairs.csv")),
                 "--out", str(run), *TINY]) == 0
    texts = [" ".join(WORDS), "gamma delta mu"]
    _pad_wins_first(run, texts[0])
    capsys.readouterr()
    assert main(["translate", str(run), *texts]) == 0
    ours = capsys.readouterr().out.splitlines()
    assert main(["export", str(run), "--hf", str(out)]) == 0
    hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    source = AutoTokenizer.from_pretrained(out)
    target = AutoTokenizer.from_pretrained(out / "target_tokenizer")
    with torch.no_grad():
        unbanned = [hf.generate(**source([text], return_tensors="pt"), bad_words_ids=None)[0]
                    for text in texts]
        ids = [hf.generate(**source([text], return_tensors="pt"))[0] for text in texts]
    assert any(PAD in row[1:].tolist() for row in unbanned)  # without the ban, pad wins
    assert [target.decode(row, skip_special_tokens=True) for row in ids] == ours
    assert not any(PAD in row[1:].tolist() for row in ids)
    assert json.loads((out / "generation_config.json").read_text())["bad_words_ids"] == [[PAD]]
