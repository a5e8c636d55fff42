"""``attnlab train translate --init DIR`` takes its sizes and its reach from DIR's config.json.

Tiny random ``MarianMTModel`` directories (``save_marian``) whose depths or position tables
differ from attnlab's defaults: a 1-layer or 1/2-layer model trains with no layer flag and its
logits at step 0 are Marian's (fp32, atol = rtol = 1e-5, as in test_init_translate.py); a flag
that disagrees with DIR is refused in one line; a built-in dataset whose pairs are longer than
DIR's ``max_position_embeddings`` is refused before the run directory is written.
"""
import json

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
from attnlab.cli import main  # noqa: E402
from tests.interop.test_init_translate import PAIRS, STEPS, Probe, _with, save_marian  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
TOL = dict(atol=1e-5, rtol=1e-5)


def _marian(d, **sizes):
    """``save_marian``'s directory with the config keys ``sizes`` changed (random weights)."""
    save_marian(d, [t for pair in PAIRS for t in pair])
    config = json.loads((d / "config.json").read_text())
    hf = transformers.MarianMTModel(transformers.MarianConfig(**{**config, **sizes}))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" not in name and "layer_norm" not in name:
                p.normal_(std=0.3)
    hf.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def pairs_csv(tmp_path_factory):
    import csv

    path = tmp_path_factory.mktemp("sizes") / "pairs.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("source", "target"), *PAIRS])
    return path


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("enc, dec", [(1, 1), (1, 2)], ids=["1-1", "1-2"])
def test_the_directorys_depths_are_the_runs_without_a_flag(pairs_csv, tmp_path, monkeypatch,
                                                         enc, dec):
    d = _marian(tmp_path / "marian", encoder_layers=enc, decoder_layers=dec)
    probe, out = Probe(), tmp_path / "run"
    _with(monkeypatch, probe)
    assert main(["train", "translate", "--init", str(d), "--data", str(pairs_csv),
                 "--out", str(out), *STEPS]) == 0
    cfg = __import__("yaml").safe_load((out / "config.yaml").read_text())
    assert (cfg["num_encoder_layers"], cfg["num_decoder_layers"]) == (enc, dec)
    hf = transformers.MarianMTModel.from_pretrained(d, local_files_only=True).eval()
    src, tgt = probe.batch
    pad = hf.config.pad_token_id
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=(src != pad).long(),
                      decoder_input_ids=tgt[:, :-1]).logits
    assert_close(probe.logits, expected, **TOL)


@pytest.mark.slow  # reads a checkpoint and its tokenizer
@pytest.mark.parametrize("flag, value", [("--num-layers", "2"), ("--num-encoder-layers", "2"),
                                         ("--num-decoder-layers", "3")])
def test_a_depth_flag_that_disagrees_with_the_directory_is_refused(pairs_csv, tmp_path, capsys,
                                                                   flag, value):
    d = _marian(tmp_path / "marian", encoder_layers=1, decoder_layers=1)
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(d), "--data", str(pairs_csv),
                 "--out", str(out), *STEPS, flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{flag} {value}" in err and "1" in err, err
    assert not out.exists()


@pytest.mark.slow  # spells the built-in numbers
def test_built_in_pairs_longer_than_the_checkpoints_positions_are_refused_before_the_run(
        tmp_path, capsys):
    d = _marian(tmp_path / "marian", max_position_embeddings=16)
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(d), "--out", str(out), *STEPS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error: --dataset numbers: a source of" in err, err
    assert "model reads at most 16" in err and not out.exists()
