"""``attnlab train translate --init DIR``: a Marian directory on disk -> an ordinary translate run.

A tiny ``MarianMTModel`` built from a config, with random weights (all of them, a non-zero
``final_logits_bias`` too: opus-mt's is trained) saved by ``save_pretrained``, beside
SentencePiece models trained here on the parallel file's text; nothing downloaded. Logits are
compared in fp32 with atol = rtol = 1e-5 (the feature permutation of ``attnlab.interop.marian``
reorders sums); token ids and frozen weights exactly.
"""
import csv
import json
import shutil

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")
import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from tests.interop.test_checkpoint import write_marian_tokenizer  # noqa: E402
from tests.training.loop_probe import probe_loop  # noqa: E402

# without sacremoses installed, transformers' MarianTokenizer warns (it normalises nothing)
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
TOL = dict(atol=1e-5, rtol=1e-5)
EN = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
DE = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]
# 60 pairs of two spelled digits: "three seven" -> "drei sieben"
PAIRS = [(f"{EN[a]} {EN[b]}", f"{DE[a]} {DE[b]}") for a in range(10) for b in range(0, 10, 2)
         if (a + b) % 5][:60]
STEPS = ["--max-steps", "3", "--warmup", "1", "--batch-size", "8", "--threads", "1",
         "--lr", "1e-3"]


def save_marian(d, texts):
    """A Marian directory in opus-mt's layout (eos 0, unk 1, pieces, pad last; shared and tied
    embeddings scaled by √D; swish), every weight random."""
    vocab = write_marian_tokenizer(d, {"source": texts, "target": texts}, 40)
    config = transformers.MarianConfig(
        vocab_size=len(vocab), d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=24,
        decoder_ffn_dim=24, max_position_embeddings=64, activation_function="swish",
        scale_embedding=True, pad_token_id=vocab["<pad>"], eos_token_id=0,
        decoder_start_token_id=vocab["<pad>"], forced_eos_token_id=None, dropout=0.0)
    hf = transformers.MarianMTModel(config)
    with torch.no_grad():  # HF's init (std 0.02, zero biases) would hide a misplaced tensor
        for name, p in hf.named_parameters():
            if "embed_positions" in name:
                continue
            if "layer_norm.weight" in name:
                p.normal_(1.0, 0.2)
            else:
                p.normal_(std=0.1 if "embed" in name or "shared" in name else 0.3)
        hf.final_logits_bias.normal_(std=1.0)
    hf.save_pretrained(d)
    return d


def _hf(d):
    model = transformers.MarianMTModel.from_pretrained(d, local_files_only=True).eval()
    return model, transformers.MarianTokenizer.from_pretrained(d, local_files_only=True)


class Probe:
    """The first training batch and the model's logits on it, taken before the first step."""

    def __init__(self):
        self.batch = self.logits = None

    def on_train_batch_start(self, loop, batch):
        if self.batch is None:
            src, tgt = (t.clone() for t in batch)
            with torch.no_grad():
                self.logits = loop.module.model(src, tgt[:, :-1]).clone()
            self.batch = (src, tgt)


def _with(monkeypatch, *extra):
    """Hand ``extra`` probes to the training loops started while ``monkeypatch`` holds."""
    probe_loop(monkeypatch, *extra)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("init_translate")
    with open(root / "pairs.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["source", "target"])
        w.writerows(PAIRS)
    save_marian(root / "marian", [t for pair in PAIRS for t in pair])
    return root


@pytest.fixture(scope="module")
def trained(files, tmp_path_factory):
    """A run from the Marian directory: (run directory, the probe of its first step)."""
    probe = Probe()
    mp = pytest.MonkeyPatch()
    _with(mp, probe)
    out = tmp_path_factory.mktemp("runs") / "run"
    try:
        assert main(["train", "translate", "--init", str(files / "marian"), "--data",
                     str(files / "pairs.csv"), "--out", str(out), *STEPS]) == 0
    finally:
        mp.undo()
    return out, probe


@pytest.mark.slow  # trains a run
def test_the_runs_logits_at_step_0_are_the_checkpoints_on_its_own_batches(files, trained):
    run, probe = trained
    hf, theirs = _hf(files / "marian")
    src, tgt = probe.batch
    pad = theirs.pad_token_id
    # the batch is Marian's encoding: source pieces + </s>; target [pad (start), pieces, </s>]
    sources = {tuple(theirs(s)["input_ids"]) for s, _ in PAIRS}
    targets = {tuple(theirs(text_target=t)["input_ids"]) for _, t in PAIRS}
    for row_src, row_tgt in zip(src.tolist(), tgt.tolist()):
        assert tuple(i for i in row_src if i != pad) in sources
        assert row_tgt[0] == pad and tuple(i for i in row_tgt[1:] if i != pad) in targets
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=(src != pad).long(),
                      decoder_input_ids=tgt[:, :-1]).logits
    assert_close(probe.logits, expected, **TOL)


@pytest.mark.slow  # trains a run
def test_the_run_records_its_source_and_opens_as_any_run(files, trained, capsys, tmp_path):
    import yaml

    run, _ = trained
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    marian = files / "marian"
    assert cfg["init"] == str(marian.resolve())
    assert cfg["init_sha256"] == read_checkpoint(marian, task="translate").sha256
    assert (cfg["model_dim"], cfg["num_encoder_layers"], cfg["activation"]) == (16, 2, "silu")
    assert "src_tokenizer" not in cfg and "vocab_size" not in cfg  # the checkpoint's own
    model, tok = attnlab.load(run)
    assert tok.marian and model.config.final_logits_bias
    assert (model.pad_id, model.sos_id, model.eos_id) == (tok.tgt.pad_id, tok.tgt.pad_id, 0)
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"test_bleu", "test_chrf", "test_exact_match"} <= set(metrics)
    capsys.readouterr()
    assert main(["translate", str(run), "three seven", "one two"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    def greedy(text):
        src = torch.tensor(tok.encode_sources([text]))
        return tok.decode(model.generate(src, cfg["max_target_len"])[0, 1:].tolist())

    assert lines[0] == greedy("three seven")
    assert main(["evaluate", str(run), "--data", str(files / "pairs.csv")]) == 0
    assert "bleu" in capsys.readouterr().out.lower()
    assert main(["predict", str(run), "--input", "five five", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["prediction"] == greedy("five five")
    page = tmp_path / "view.html"
    assert main(["view", str(run), "--input", "three seven", "--out", str(page)]) == 0
    assert "attnlab-attention" in page.read_text(encoding="utf-8")


@pytest.mark.slow  # trains a run
def test_export_writes_a_marian_directory_with_the_runs_logits_and_ids(trained, tmp_path):
    run, _ = trained
    out = tmp_path / "hf"
    assert main(["export", str(run), "--hf", str(out)]) == 0
    for name in ("config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json",
                 "tokenizer_config.json"):
        assert (out / name).is_file(), name
    hf, theirs = _hf(out)
    ours, tok = attnlab.load(run)
    texts = ["three seven", "nine", "one two eight"]
    for text in texts:
        assert theirs(text)["input_ids"] == tok.encode_sources([text])[0]
        assert theirs(text_target=text)["input_ids"] == tok.encode_targets([text])[0][1:]
    batch = theirs(texts, padding=True, return_tensors="pt")
    tgt = torch.tensor(tok.encode_targets(["drei sieben"]) * 3)
    with torch.no_grad():
        expected = ours(batch["input_ids"], tgt, src_mask=batch["attention_mask"].bool())
        assert_close(hf(**batch, decoder_input_ids=tgt).logits, expected, **TOL)
        generated = hf.generate(**batch, max_new_tokens=8, do_sample=False, num_beams=1)
    assert generated.tolist() == ours.generate(batch["input_ids"], 8,
                                               src_mask=batch["attention_mask"].bool()).tolist()


def _weights(run):
    return attnlab.load(run)[0].state_dict()


def _initial(files):
    model = read_checkpoint(files / "marian", task="translate").model
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("freeze, kept, trained", [
    ("encoder", ("src_embedding.", "transformer.encoder."), ("transformer.decoder.layers.",)),
    # the decoder's blocks count: the last one trains (and the head, tied to the target
    # embedding as in Marian), the first block, the encoder and its embedding stay
    ("all-but-last-1", ("src_embedding.", "transformer.encoder.",
                        "transformer.decoder.layers.0."), ("transformer.decoder.layers.1.",)),
])
def test_freeze_keeps_the_frozen_weights_bit_identical(files, tmp_path, freeze, kept, trained):
    out = tmp_path / "frozen"
    assert main(["train", "translate", "--init", str(files / "marian"), "--data",
                 str(files / "pairs.csv"), "--out", str(out), "--freeze", freeze,
                 *STEPS]) == 0
    before, after = _initial(files), _weights(out)
    frozen = [k for k in before if k.startswith(kept)]
    changed = [k for k in before if k.startswith(trained)]
    assert frozen and changed
    assert all(torch.equal(before[k], after[k]) for k in frozen)
    assert not all(torch.equal(before[k], after[k]) for k in changed)  # these trained
    assert torch.equal(before["final_logits_bias"], after["final_logits_bias"])  # a buffer


@pytest.mark.slow  # trains a run
def test_lora_trains_only_the_adapters_merged_into_the_attention(files, tmp_path, capsys):
    out = tmp_path / "lora"
    assert main(["train", "translate", "--init", str(files / "marian"), "--data",
                 str(files / "pairs.csv"), "--out", str(out), "--lora-rank", "2",
                 *STEPS]) == 0
    err = capsys.readouterr().err
    # rank 2: 2·(in + out) parameters per projection of the 4 self-attentions (stacked qkv,
    # out) and 2 cross-attentions (q, stacked kv, out); nothing else trains
    from attnlab.nn import MultiheadAttention

    model = read_checkpoint(files / "marian", task="translate").model
    projections = [m for a in model.modules() if isinstance(a, MultiheadAttention)
                   for m in a.modules() if isinstance(m, torch.nn.Linear)]
    adapters = sum(2 * (m.in_features + m.out_features) for m in projections)
    assert f"on {len(projections)} attention projections: training {adapters:,} parameters" \
        in err, err
    before, after = _initial(files), _weights(out)
    assert set(before) == set(after)  # merged: an ordinary model, no adapter tensors
    attention = {k for k in before if "attn." in k and k.endswith(".weight")
                 and "norm" not in k}
    assert attention
    assert all(torch.equal(before[k], after[k]) for k in before if k not in attention)
    assert not all(torch.equal(before[k], after[k]) for k in attention)


@pytest.mark.slow  # trains a run
def test_resume_goes_on_without_the_checkpoint_directory(files, tmp_path, monkeypatch):
    class Crash:
        def on_train_batch_end(self, loop):
            if loop.step == 3:
                raise KeyboardInterrupt

    marian = tmp_path / "marian"
    shutil.copytree(files / "marian", marian)
    out = tmp_path / "run"
    flags = ["--data", str(files / "pairs.csv"), "--out", str(out), "--max-steps", "4",
             "--checkpoint-every", "2", *STEPS[2:]]
    _with(monkeypatch, Crash())
    assert main(["train", "translate", "--init", str(marian), *flags]) == 130  # as by Ctrl-C
    assert not (out / "metrics.json").exists()
    monkeypatch.undo()
    shutil.rmtree(marian)  # a resumed run never reads DIR again
    assert main(["train", "translate", "--resume", *flags]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4
    model, tok = attnlab.load(out)
    assert tok.marian


@pytest.mark.slow  # trains a run
def test_an_attnlab_run_is_an_init_directory_too(files, trained, tmp_path, monkeypatch):
    run, _ = trained
    probe = Probe()
    _with(monkeypatch, probe)
    assert main(["train", "translate", "--init", str(run), "--data", str(files / "pairs.csv"),
                 "--out", str(tmp_path / "again"), *STEPS]) == 0
    model, _ = attnlab.load(run)
    src, tgt = probe.batch
    with torch.no_grad():
        assert_close(probe.logits, model(src, tgt[:, :-1]), **TOL)


@pytest.mark.parametrize("flags, message", [
    (["--model-dim", "32"], ["--model-dim 32", "16"]),
    (["--num-heads", "4"], ["--num-heads 4", "2"]),
    (["--vocab-size", "500"], ["--vocab-size", "brings its checkpoint's own tokenizer"]),
    (["--src-tokenizer", "bpe"], ["--src-tokenizer", "brings its checkpoint's own tokenizer"]),
    (["--arch", "rnn"], ["--arch rnn", "transformer"]),
], ids=["model-dim", "num-heads", "vocab-size", "tokenizer", "arch"])
def test_what_the_checkpoint_fixes_is_refused_in_one_line(files, tmp_path, capsys, flags,
                                                          message):
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(files / "marian"), "--data",
                 str(files / "pairs.csv"), "--out", str(out), *STEPS, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(m in err for m in message), err
    assert not out.exists()


def test_an_unsupported_model_type_is_refused_in_one_line(files, tmp_path, capsys):
    d = tmp_path / "bart"
    shutil.copytree(files / "marian", d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "model_type": "bart"}))
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(d), "--data", str(files / "pairs.csv"),
                 "--out", str(out), *STEPS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'bart'" in err and "marian" in err, err
    assert not out.exists()


def test_a_config_seq2seq_cannot_reproduce_is_refused_before_the_run(files, tmp_path, capsys):
    d = tmp_path / "odd"
    shutil.copytree(files / "marian", d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "decoder_ffn_dim": 32}))
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(d), "--data", str(files / "pairs.csv"),
                 "--out", str(out), *STEPS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "encoder_ffn_dim 24 and decoder_ffn_dim 32" in err
    assert not out.exists()


def test_a_pair_longer_than_the_checkpoints_positions_is_refused_before_the_run(files, tmp_path,
                                                                               capsys):
    data = tmp_path / "long.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("source", "target"), *PAIRS, (" ".join(EN * 7), "null")])
    out = tmp_path / "run"
    assert main(["train", "translate", "--init", str(files / "marian"), "--data", str(data),
                 "--out", str(out), *STEPS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--data {data}: a source of" in err, err
    assert "model reads at most 64" in err and not out.exists()
