"""``attnlab train lm``: a tiny prepare -> train -> evaluate -> generate run, in-process."""
import json
import math

import pytest
import torch
import yaml
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.data.corpus import TokenWindows, prepare
from attnlab.models import CausalLM
from attnlab.tasks.base import line_of
from attnlab.tasks.lm import TASKS
from attnlab.tasks.lm.runtime import lm_metrics

TASK = TASKS["lm"]

TEXT = "abcabdabcabe " * 300 + "\n"
TINY = ["--max-steps", "60", "--model-dim", "32", "--num-heads", "2", "--num-layers", "1",
        "--dim-feedforward", "64", "--block-size", "24", "--batch-size", "16", "--lr", "1e-2",
        "--warmup", "5", "--dropout", "0", "--val-batches", "4", "--threads", "1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lm")
    (tmp / "text.txt").write_text(TEXT, encoding="utf-8")
    prepare([tmp / "text.txt"], tmp / "data", tokenizer="char")
    assert main(["train", "lm", "--data", str(tmp / "data"), "--out", str(tmp / "run"), *TINY]) == 0
    return tmp


@pytest.mark.slow
def test_run_directory_and_metrics(run):
    files = {p.name for p in (run / "run").iterdir()}
    assert {"config.yaml", "model.safetensors", "tokenizer.json", "metrics.json",
            "lr_schedule.png", "checkpoints"} <= files
    metrics = json.loads((run / "run" / "metrics.json").read_text())
    assert {"val_loss", "val_perplexity", "steps", "train_seconds", "parameters"} <= set(metrics)
    assert metrics["steps"] == 60
    # metrics.json holds 6 significant digits, so exp of the written loss agrees to ~1e-5
    assert metrics["val_perplexity"] == pytest.approx(math.exp(metrics["val_loss"]), rel=1e-5)
    # the text is nearly deterministic: a trained model is far better than uniform guessing
    assert metrics["val_loss"] < 0.5 * math.log(9)


@pytest.mark.slow
def test_load_evaluate_and_greedy_continuation(run):
    model, tokenizer = attnlab.load(run / "run")
    assert isinstance(model, CausalLM) and not model.training
    metrics = json.loads((run / "run" / "metrics.json").read_text())
    cfg = yaml.safe_load((run / "run" / "config.yaml").read_text())
    cfg = TASK.typed(cfg, run / "run")
    again = TASK.runtime().evaluate(TASK, run / "run", cfg, None)
    assert again["val_loss"] == pytest.approx(metrics["val_loss"], abs=1e-5)
    out = model.generate(torch.tensor([tokenizer.encode("abcab")]), 7)
    assert tokenizer.decode(out[0].tolist()).startswith("abcab")
    found = TASK.runtime().predict_many(TASK, run / "run", cfg, ["abcab"], ["--input"])
    assert line_of(found[0])  # one line of continuation


@pytest.mark.slow
def test_evaluate_on_a_text_file_scores_the_whole_file_in_windows(run):
    import numpy as np

    cfg = yaml.safe_load((run / "run" / "config.yaml").read_text())
    text = "abcabd " * 30 + "abcabe\n" * 20
    (run / "other.txt").write_text(text, encoding="utf-8")
    # encoded chunk by chunk into a token file (as prepare does: chunking is tested there)
    metrics = TASK.runtime().evaluate(TASK, run / "run", TASK.typed(cfg, run / "run"),
                                      str(run / "other.txt"))
    assert set(metrics) == {"val_loss", "val_perplexity"}
    # the same as encoding the whole text at once and scoring its non-overlapping windows and
    # the tokens after them (349 targets: 14 windows of 24 leave 13)
    model, tokenizer = attnlab.load(run / "run")
    np.asarray(tokenizer.encode(text), dtype=cfg["dtype"]).tofile(run / "whole.bin")
    expected = lm_metrics(model, TokenWindows(run / "whole.bin", cfg["block_size"],
                                              dtype=cfg["dtype"]), cfg["batch_size"],
                          to_the_end=True)
    assert metrics["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-6)


def test_lm_metrics_is_the_token_mean_cross_entropy(tmp_path):
    import numpy as np

    np.arange(40, dtype=np.uint16).__mod__(7).astype(np.uint16).tofile(tmp_path / "v.bin")
    windows = TokenWindows(tmp_path / "v.bin", 6, dtype="uint16")
    torch.manual_seed(0)
    lm = CausalLM(7, model_dim=16, num_heads=2, num_layers=1, max_len=6).eval()
    x = torch.stack([windows[i][0] for i in range(len(windows))])
    y = torch.stack([windows[i][1] for i in range(len(windows))])
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(lm(x).flatten(0, 1), y.flatten())
    got = lm_metrics(lm, windows, batch_size=4)  # uneven batches: still every token once
    assert_close(got["val_loss"], float(expected), atol=1e-6, rtol=1e-6)
    assert_close(got["val_perplexity"], math.exp(float(expected)), atol=1e-5, rtol=1e-6)


@pytest.mark.slow
def test_train_on_a_plain_text_file_prepares_it_in_the_run(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    args = ["train", "lm", "--data", str(tmp_path / "t.txt"), "--out", str(tmp_path / "r"),
            "--tokenizer", "word", "--positional", "rope", *TINY]
    args[args.index("--max-steps") + 1] = "3"
    assert main(args) == 0
    assert (tmp_path / "r" / "data" / "train.bin").is_file()
    model, tokenizer = attnlab.load(tmp_path / "r")
    assert type(tokenizer).__name__ == "WordTokenizer" and model.positional == "rope"


@pytest.mark.slow
def test_a_moved_run_evaluates_on_the_corpus_it_prepared_in_itself(tmp_path, capsys):
    """A text file given as --data is prepared into RUN/data, the run's own: a run directory
    moved elsewhere (or copied off a server) evaluates on its own RUN/data, as it did."""
    import shutil

    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    args = ["train", "lm", "--data", str(tmp_path / "t.txt"), "--out", str(tmp_path / "r"), *TINY]
    args[args.index("--max-steps") + 1] = "3"
    assert main(args) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "r")]) == 0
    before = json.loads(capsys.readouterr().out)
    shutil.copytree(tmp_path / "r", tmp_path / "copy", ignore=shutil.ignore_patterns("data"))
    shutil.move(tmp_path / "r", tmp_path / "moved")
    assert main(["evaluate", str(tmp_path / "moved")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == before and err == ""
    # a copy without its data/ (the large part, left out of an rsync) reads config.yaml's
    # data_dir, the original run's corpus, back in its place (its digest vouches for it)
    shutil.move(tmp_path / "moved", tmp_path / "r")
    assert main(["evaluate", str(tmp_path / "copy")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == before and err == ""


@pytest.mark.slow
@pytest.mark.parametrize("command", [["plot", "attention"], ["view"]])
def test_attention_of_a_text_longer_than_the_model_reads_is_refused(run, tmp_path, capsys,
                                                                    command):
    """Cut to its first --block-size tokens without a word once; reverse, translate and
    classify refuse theirs too."""
    out = tmp_path / ("a.png" if command[0] == "plot" else "a.html")
    assert main([*command, str(run / "run"), "--input", "abcab " * 5, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "attnlab: error: --input has 30 tokens; this model reads at most --block-size 24\n"
    assert not out.exists()


@pytest.mark.slow
def test_evaluate_names_a_directory_given_as_data(run, capsys):
    assert main(["evaluate", str(run / "run"), "--data", str(run / "data")]) == 2
    err = capsys.readouterr().err
    assert err == f"attnlab: error: --data {run / 'data'}: is a directory; give a text file to score\n"


def test_a_prepared_corpus_brings_its_tokenizer(run, tmp_path, capsys):
    """--tokenizer and --vocab-size are for a text file: with a prepared --data they were taken
    without a word and config.yaml said `tokenizer: bpe` of a char corpus; config.yaml records
    the corpus's own tokeniser."""
    assert main(["train", "lm", "--data", str(run / "data"), "--out", str(tmp_path / "r"),
                 "--tokenizer", "bpe", *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnlab: error: --tokenizer: for a text file only;")
    assert not (tmp_path / "r").exists()
    assert yaml.safe_load((run / "run" / "config.yaml").read_text())["tokenizer"] == "char"


@pytest.mark.slow
def test_resume_refuses_a_config_yaml_whose_tokenizer_was_edited(tmp_path, capsys):
    """The run trains on RUN/data, prepared with the tokeniser config.yaml had: an edited
    `tokenizer:` would be a config.yaml describing a run that was never trained."""
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    args = ["train", "lm", "--data", str(tmp_path / "t.txt"), "--out", str(out), *TINY]
    args[args.index("--max-steps") + 1] = "2"
    assert main(args) == 0
    config = out / "config.yaml"
    config.write_text(config.read_text().replace("tokenizer: char", "tokenizer: word"))
    edited = config.read_bytes()
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(out), "--resume", "--max-steps", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("was prepared with the char tokeniser; put tokenizer: char back, or "
                        "start a new run") and len(err.splitlines()) == 1
    assert config.read_bytes() == edited


@pytest.mark.parametrize("args, message", [
    ([], "--data is required"),
    (["--data", "/nonexistent/x.txt"], "--data: file not found"),
    (["--data", "."], "not a prepared corpus"),
    (["--data", "README.md", "--block-size", "1"], "--block-size"),
    (["--data", "{tiny}"], "tiny.txt: 3 bytes are too few for --block-size 128"),
])
def test_bad_settings_name_the_flag(args, message, capsys, tmp_path):
    (tmp_path / "tiny.txt").write_text("abc")  # once refused only after the run directory
    args = [a.format(tiny=tmp_path / "tiny.txt") for a in args]
    assert main(["train", "lm", "--out", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_lm_trains_with_the_gpt_recipe_by_default(run):
    """Weight decay 0.1 on the matrices only, beta2 0.99, and dropout on the attention weights
    as on the sub-layers (nanoGPT's recipe); config.yaml says so, and the optimiser's state in
    the checkpoint shows which tensors were decayed."""
    cfg = yaml.safe_load((run / "run" / "config.yaml").read_text())
    assert (cfg["weight_decay"], cfg["beta2"], cfg["attention_dropout"]) == (0.1, 0.99, 0.0)
    ckpt = torch.load(run / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    decayed, kept = ckpt["optimizer"]["param_groups"]
    assert (decayed["weight_decay"], kept["weight_decay"]) == (0.1, 0.0)
    assert decayed["betas"] == (0.9, 0.99)
    from attnlab.training.module import decay_groups

    model = attnlab.load(run / "run")[0]
    matrices, rest = (g["params"] for g in decay_groups(model, 0.1))
    assert (len(decayed["params"]), len(kept["params"])) == (len(matrices), len(rest))
    assert {p.ndim for p in matrices} == {2}
    assert any(p is model.positional_encoding.embedding.weight for p in rest)  # looked up
    assert {p.ndim for p in rest} == {1, 2}  # biases, norms' scales and the position table
    assert model.token_embedding.weight is model.lm_head.weight  # tied: one tensor, decayed
    assert any(p is model.token_embedding.weight for p in matrices)


def test_attention_dropout_follows_dropout_unless_given(tmp_path):
    from attnlab.commands.train import build_config

    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    given = {"data": str(tmp_path / "text.txt"), "dropout": 0.2}
    assert build_config("lm", given)["attention_dropout"] == 0.2
    assert build_config("lm", {**given, "attention_dropout": 0.0})["attention_dropout"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("precision, measured_again", [("32", False), ("bf16-mixed", True)])
def test_the_last_validation_is_the_runs_val_loss_in_float32(run, tmp_path, monkeypatch,
                                                              precision, measured_again):
    """A float32 run's last step is validated once: metrics.json's val_loss is the loop's last
    validation (the log's last val_loss), not a second pass over the same windows; under
    autocast the float32 model that evaluate loads is measured again."""
    import pandas as pd

    from attnlab.tasks.lm import runtime as lm_runtime

    calls = []
    real = lm_runtime.lm_metrics
    monkeypatch.setattr(lm_runtime, "lm_metrics", lambda *a, **k: calls.append(1) or real(*a, **k))
    steps = ["--max-steps", "4", "--precision", precision]
    assert main(["train", "lm", "--data", str(run / "data"), "--out", str(tmp_path / "r"),
                 *TINY, *steps]) == 0
    assert len(calls) == int(measured_again)
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    log = pd.read_csv(tmp_path / "r" / "logs" / "metrics.csv").dropna(subset=["val_loss"])
    assert log["step"].iloc[-1] == 4
    tolerance = 1e-5 if precision == "32" else 5e-2  # bf16 autocast against float32
    assert metrics["val_loss"] == pytest.approx(log["val_loss"].iloc[-1], abs=tolerance)


@pytest.mark.slow
def test_no_bias_activation_and_eps_flags_are_recorded_and_honoured_on_load(run, tmp_path,
                                                                           capsys):
    """CausalLM's bias, activation and layer_norm_eps once had no `train lm` flag
    (nanoGPT's recipe has no biases). A --no-bias run has no bias parameter at all (LayerNorms
    included), records the three in config.yaml, and loads, evaluates, predicts and resumes
    with them."""
    out = tmp_path / "nobias"
    assert main(["train", "lm", "--data", str(run / "data"), "--out", str(out), *TINY,
                 "--max-steps", "8", "--no-bias", "--activation", "relu",
                 "--layer-norm-eps", "1e-6"]) == 0
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert (cfg["bias"], cfg["activation"], cfg["layer_norm_eps"]) == (False, "relu", 1e-6)
    model, tokenizer = attnlab.load(out)
    assert [n for n, _ in model.named_parameters() if "bias" in n] == []
    assert isinstance(model.decoder.layers[0].linear_net[2], torch.nn.ReLU)
    assert {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-6}
    assert main(["predict", str(out), "--input", "abcab"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["train", "lm", "--out", str(out), "--resume", "--max-steps", "10"]) == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["bias"] is False
    assert [n for n, _ in attnlab.load(out)[0].named_parameters() if "bias" in n] == []


@pytest.mark.slow
def test_a_run_written_before_the_flags_loads_with_the_old_defaults(run, tmp_path):
    """config.yaml of a run from before those flags has no bias, activation or layer_norm_eps: it
    loads as it was built (biases, GELU, eps 1e-5) and gives the same loss."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(run / "run", old)
    cfg = yaml.safe_load((old / "config.yaml").read_text())
    for key in ("bias", "activation", "layer_norm_eps"):
        cfg.pop(key, None)
    (old / "config.yaml").write_text(yaml.safe_dump(cfg))
    model = attnlab.load(old)[0]
    assert model.config.bias and model.config.activation == "gelu"
    assert model.config.layer_norm_eps == 1e-5
    again = TASK.runtime().evaluate(TASK, old, TASK.typed(cfg, old), None)
    assert again["val_loss"] == pytest.approx(
        json.loads((run / "run" / "metrics.json").read_text())["val_loss"], abs=1e-5)


def test_a_run_made_before_the_corpus_digests_evaluates_as_it_did(run, tmp_path):
    """config.yaml of a run from before its corpus was identified by digests has no
    corpus_sha256: evaluate has nothing to check the corpus against, and measures it."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(run / "run", old)
    cfg = yaml.safe_load((old / "config.yaml").read_text())
    del cfg["corpus_sha256"]
    (old / "config.yaml").write_text(yaml.safe_dump(cfg))
    again = TASK.runtime().evaluate(TASK, old, TASK.typed(cfg, old), None)
    assert again["val_loss"] == pytest.approx(
        json.loads((run / "run" / "metrics.json").read_text())["val_loss"], abs=1e-5)


@pytest.mark.slow
def test_evaluate_says_which_windows_of_the_validation_split_it_scored(run, tmp_path, capsys):
    """evaluate's val_loss is training's: the first --val-batches batches of the split, not
    all of it; it said "on the validation split" and nothing more. The windows, checked by
    hand: the first 3 non-overlapping windows of val.bin, mean next-token cross-entropy."""
    import shutil

    import numpy as np

    small = tmp_path / "small"
    shutil.copytree(run / "run", small)
    cfg = yaml.safe_load((small / "config.yaml").read_text())
    cfg.update(val_batches=1, batch_size=3)  # training's val_loss: 3 of the split's windows
    (small / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["evaluate", str(small)]) == 0
    out, err = capsys.readouterr()
    model, _ = attnlab.load(small)
    val = torch.from_numpy(np.fromfile(run / "data" / "val.bin", dtype=cfg["dtype"]).astype(int))
    T = cfg["block_size"]
    n = (len(val) - 1) // T
    assert n > 3
    x = torch.stack([val[i * T: i * T + T] for i in range(3)])
    y = torch.stack([val[i * T + 1: i * T + T + 1] for i in range(3)])
    with torch.no_grad():
        loss = float(torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()))
    assert json.loads(out)["val_loss"] == pytest.approx(loss, rel=1e-5)  # 6 digits printed
    assert (f"note: val_loss over the first 3 of the validation split's {n} windows "
            f"(--val-batches 1 of --batch-size 3), as training measured it") in err


@pytest.mark.parametrize("args, message", [
    (["--activation", "tanh"], "--activation"),
    (["--layer-norm-eps", "0"], "--layer-norm-eps must be > 0, got 0.0"),
])
def test_bad_model_flags_are_refused_before_a_run_directory(args, message, tmp_path, capsys):
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["train", "lm", "--data", str(tmp_path / "text.txt"), "--out", str(out),
                 *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not out.exists()


def test_evaluate_data_scores_every_token_of_the_file_after_its_first(tmp_path):
    """A file of 10 tokens with --block-size 6: one whole window scores tokens 1..6; tokens
    7..9 were left out (val_loss of 6 of 9 tokens) and are now scored from the file's last
    window, tokens 3..8 (a full window of context, as the others have)."""
    from types import SimpleNamespace

    from attnlab.tasks.lm.runtime import _file_metrics
    from attnlab.tokenizers import CharTokenizer

    text = "abcabdacbe"
    (tmp_path / "f.txt").write_text(text, encoding="utf-8")
    tokenizer = CharTokenizer.fit([text])
    ids = tokenizer.encode(text)
    assert len(ids) == 10
    torch.manual_seed(0)
    lm = CausalLM(tokenizer.vocab_size, model_dim=16, num_heads=2, num_layers=1, max_len=6).eval()
    cfg = SimpleNamespace(block_size=6, dtype="uint16", batch_size=4)
    got = _file_metrics(lm, tokenizer, tmp_path / "f.txt", cfg)
    # by hand, one token at a time: token j is predicted from the window that holds it
    nll = []
    with torch.no_grad():
        for j in range(1, len(ids)):
            first = 0 if j <= 6 else len(ids) - 1 - 6
            logits = lm(torch.tensor([ids[first:j]]))[0, -1]  # (V,)
            nll.append(-float(torch.log_softmax(logits, -1)[ids[j]]))
    assert_close(got["val_loss"], sum(nll) / len(nll), atol=1e-6, rtol=1e-6)
    assert_close(got["val_perplexity"], math.exp(sum(nll) / len(nll)), atol=1e-5, rtol=1e-6)
