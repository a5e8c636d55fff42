"""`--checkpoint last`: an interrupted run (checkpoints/last.ckpt, no model.safetensors) can be
predicted from, generated from, evaluated and exported, each saying which step it uses; a
missing or unreadable checkpoint is refused in one line naming the file (issue #37, item 9b)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import attnlab
from attnlab.cli import main

pytestmark = pytest.mark.slow  # every test here reads a trained run
FIXTURES = Path(__file__).parents[1] / "fixtures"
TEXT = "the quick brown fox jumps over the lazy dog. " * 60
TINY = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "32",
        "--block-size", "16", "--batch-size", "8", "--threads", "1", "--warmup", "2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A finished lm run and a copy of it as an interrupted run leaves it (its final checkpoint,
    no model.safetensors); a LoRA run likewise."""
    tmp = tmp_path_factory.mktemp("ckpt")
    (tmp / "t.txt").write_text(TEXT, encoding="utf-8")
    assert main(["train", "lm", "--data", str(tmp / "t.txt"), "--out", str(tmp / "done"),
                 "--max-steps", "12", *TINY]) == 0
    assert main(["train", "lm", "--data", str(tmp / "done" / "data"), "--out",
                 str(tmp / "lora_done"), "--init", str(tmp / "done"), "--lora-rank", "2",
                 "--max-steps", "4", "--lr", "1e-2", *TINY]) == 0
    for name in ("done", "lora_done"):
        cut = tmp / name.replace("done", "cut")
        shutil.copytree(tmp / name, cut)
        (cut / "model.safetensors").unlink()
    return tmp


def _out(capsys, argv):
    assert main(argv) == 0
    return capsys.readouterr()


@pytest.mark.parametrize("command", [
    ["predict", "{run}", "--input", "the qu", "--max-new-tokens", "20"],
    ["generate", "{run}", "--prompt", "the qu", "--greedy", "--max-new-tokens", "20"],
    ["evaluate", "{run}"],
])
@pytest.mark.parametrize("name", ["cut", "lora_cut"])
def test_an_interrupted_run_answers_as_the_finished_one_from_its_last_checkpoint(
        runs, capsys, command, name):
    finished = _out(capsys, [a.format(run=runs / name.replace("cut", "done")) for a in command])
    run = runs / name
    assert main([a.format(run=run) for a in command]) == 2  # no model.safetensors
    assert capsys.readouterr().err.endswith(
        f"has no model.safetensors (did training finish?); predict, translate, generate, "
        f"evaluate, export, view and plot attention take --checkpoint last to use "
        f"{run / 'checkpoints' / 'last.ckpt'}, its last saved step\n")
    steps = 12 if name == "cut" else 4
    resumed = _out(capsys, [a.format(run=run) for a in command] + ["--checkpoint", "last"])
    assert resumed.out == finished.out  # the final checkpoint holds the final weights
    assert resumed.err == f"using {run / 'checkpoints' / 'last.ckpt'} (step {steps})\n"


def test_an_interrupted_run_exports_with_its_checkpoints_weights(runs, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    run = runs / "cut"
    assert main(["export", str(run), "--hf", str(tmp_path / "no")]) == 2
    assert "--checkpoint last" in capsys.readouterr().err
    err = _out(capsys, ["export", str(run), "--hf", str(tmp_path / "hf"),
                        "--checkpoint", "last"]).err
    assert err.startswith(f"using {run / 'checkpoints' / 'last.ckpt'} (step 12)\nwrote ")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ours, tokenizer = attnlab.load(runs / "done")
    ids = torch.tensor([tokenizer.encode("the lazy dog")])
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, ours(ids), atol=1e-5, rtol=1e-5)


def test_the_library_loads_the_checkpoint_on_request(runs):
    finished, _ = attnlab.load(runs / "lora_done")
    model, _ = attnlab.load(runs / "lora_cut", checkpoint="last")
    assert model.state_dict().keys() == finished.state_dict().keys()  # LoRA merged
    for key, value in finished.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value)
    with pytest.raises(ValueError, match="checkpoint must be None or one of"):
        attnlab.load(runs / "cut", checkpoint="best")


def test_a_missing_or_unreadable_checkpoint_is_refused_naming_it(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs / "cut", run)
    last = run / "checkpoints" / "last.ckpt"
    last.unlink()
    for command in (["predict", str(run), "--input", "the"], ["evaluate", str(run)],
                    ["generate", str(run), "--prompt", "the"],
                    ["export", str(run), "--hf", str(tmp_path / "hf")]):
        assert main([*command, "--checkpoint", "last"]) == 2
        assert capsys.readouterr().err == (f"attnlab: error: --checkpoint last: {last} not "
                                           f"found (the run saved no checkpoint yet)\n")
    last.write_bytes(b"not a checkpoint")
    assert main(["predict", str(run), "--input", "the", "--checkpoint", "last"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --checkpoint last: refusing checkpoint "
                                       f"{last}: truncated or corrupt: UnpicklingError\n")
    assert not (tmp_path / "hf").exists()


def test_a_trainer_era_checkpoint_of_another_task_is_read_too(tmp_path, capsys):
    run = tmp_path / "reverse"
    shutil.copytree(FIXTURES / "reverse-trainer", run)
    finished = _out(capsys, ["predict", str(run), "--input", "1 2 3 4"]).out
    (run / "model.safetensors").unlink()
    resumed = _out(capsys, ["predict", str(run), "--input", "1 2 3 4", "--checkpoint", "last"])
    assert resumed.out == finished
    assert resumed.err == f"using {run / 'checkpoints' / 'last.ckpt'} (step 20)\n"


def test_reading_the_checkpoint_imports_no_lightning(runs):
    code = ("import sys; from attnlab.cli import main; "
            f"rc = main(['predict', {str(runs / 'cut')!r}, '--input', 'the', '--checkpoint', "
            "'last']) or main(['generate', "
            f"{str(runs / 'cut')!r}, '--prompt', 'the', '--checkpoint', 'last', "
            "'--max-new-tokens', '3']); "
            "assert 'lightning' not in str(list(sys.modules)), 'lightning imported'; "
            "sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def _interrupt(monkeypatch, step: int, argv: list[str]) -> None:
    """``attnlab`` with ``argv``, stopped by SIGINT (as Ctrl-C) after ``step`` steps."""
    import os
    import signal

    from ..training.loop_probe import probe_loop

    class SignalAt:
        def on_train_batch_end(self, loop):
            if loop.step == step:
                os.kill(os.getpid(), signal.SIGINT)

    with monkeypatch.context() as m:
        probe_loop(m, SignalAt())
        assert main(argv) == 130


def test_a_really_interrupted_run_of_a_task_with_a_tokenizer_answers_from_its_checkpoint(
        runs, tmp_path, monkeypatch, capsys):
    """A run stopped by Ctrl-C (not a finished run with its model.safetensors removed, as
    above) had no tokenizer.json, which finish wrote at the end: every --checkpoint last
    command, the one its own error message suggests, failed with 'tokenizer file not found'.
    The tokenizer is now written before the first step."""
    run = tmp_path / "run"
    _interrupt(monkeypatch, 6, ["train", "lm", "--data", str(runs / "t.txt"), "--out", str(run),
                                "--max-steps", "12", *TINY])
    assert not (run / "model.safetensors").exists()
    capsys.readouterr()
    using = f"using {run / 'checkpoints' / 'last.ckpt'} (step 6)\n"
    for command in (["generate", str(run), "--prompt", "the qu", "--greedy",
                     "--max-new-tokens", "5"], ["evaluate", str(run)]):
        assert main([*command, "--checkpoint", "last"]) == 0, capsys.readouterr().err
        assert capsys.readouterr().err == using
    model, tokenizer = attnlab.load(run, checkpoint="last")
    assert tokenizer.decode(tokenizer.encode("the lazy dog")) == "the lazy dog"


def test_an_interrupted_translate_run_translates_from_its_last_checkpoint(tmp_path, capsys):
    """translate was the one command that reads a run without --checkpoint last: an
    interrupted translate run could not be tried before it was resumed, while the error
    named four other commands that take the flag."""
    done, cut = tmp_path / "done", tmp_path / "cut"
    assert main(["train", "translate", "--out", str(done), "--max-steps", "6", "--max-number",
                 "1000", "--test-size", "8", "--val-size", "8", "--num-layers", "1",
                 "--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32",
                 "--batch-size", "8", "--threads", "1"]) == 0
    shutil.copytree(done, cut)
    (cut / "model.safetensors").unlink()
    capsys.readouterr()
    finished = _out(capsys, ["translate", str(done), "12", "345"])
    assert main(["translate", str(cut), "12", "345"]) == 2
    assert ("; predict, translate, generate, evaluate, export, view and plot attention take "
            "--checkpoint last to use ") \
           in capsys.readouterr().err
    resumed = _out(capsys, ["translate", str(cut), "12", "345", "--checkpoint", "last"])
    assert resumed.out == finished.out and len(finished.out.splitlines()) == 2
    # and the notes of the finished run's translations, after the step it uses
    assert resumed.err == f"using {cut / 'checkpoints' / 'last.ckpt'} (step 6)\n{finished.err}"


def test_an_interrupted_run_is_viewed_and_plotted_from_its_last_checkpoint(runs, tmp_path,
                                                                         capsys):
    """An interrupted run (no model.safetensors, no metrics.json) could not be looked at:
    `view` and `plot attention` refused it, naming other commands that take --checkpoint
    last. They take it too, say the step they use, and the page and figure name that file
    and step and say the run has no metrics yet; the weights are the checkpoint's."""
    import json

    from attnlab import viz
    from attnlab.explorer import read_data

    done, cut = runs / "done", tmp_path / "cut"
    shutil.copytree(runs / "cut", cut)
    (cut / "metrics.json").unlink()
    ckpt = cut / "checkpoints" / "last.ckpt"
    assert main(["view", str(cut), "--input", "the qu", "--out", str(tmp_path / "no.html")]) == 2
    assert "view and plot attention take --checkpoint last" in capsys.readouterr().err
    assert not (tmp_path / "no.html").exists()
    pages, said = {}, {}
    for run, flags in ((done, []), (cut, ["--checkpoint", "last"])):
        out = tmp_path / f"{run.name}.html"
        said[run.name] = _out(capsys, ["view", str(run), "--input", "the qu", "--out", str(out),
                                       *flags]).err
        pages[run.name] = read_data(out.read_text(encoding="utf-8"))
    assert said == {"done": "", "cut": f"using {ckpt} (step 12)\n"}
    assert pages["cut"]["layers"] == pages["done"]["layers"]  # the final step's weights
    record = pages["cut"]["record"]
    assert record["shown"]["weights"] == "checkpoints/last.ckpt: step 12, the last saved step"
    assert record["metrics"] is None and record["note"].startswith("no metrics yet")
    assert json.loads((done / "metrics.json").read_text())["steps"] == 12
    titles = []
    save = viz._save
    viz._save = lambda fig, path: titles.append(fig._suptitle.get_text()) or save(fig, path)
    try:
        err = _out(capsys, ["plot", "attention", str(cut), "--input", "the qu", "--out",
                            str(tmp_path / "cut.png"), "--checkpoint", "last"]).err
    finally:
        viz._save = save
    assert err == f"using {ckpt} (step 12)\n"
    assert "checkpoints/last.ckpt: step 12, the last saved step · no metrics yet" in \
        " ".join(titles[0].split())


REVERSE = ["train", "reverse", "--val-every", "3", "--seed", "1", "--train-size", "64",
           "--val-size", "16", "--test-size", "16", "--model-dim", "16", "--num-heads", "2",
           "--num-layers", "1", "--threads", "1"]


def _title(capsys, argv) -> str:
    """The title of the figure `attnlab plot attention ...` draws, on one line."""
    from attnlab import viz

    titles = []
    save = viz._save
    viz._save = lambda fig, path: titles.append(fig._suptitle.get_text()) or save(fig, path)
    try:
        _out(capsys, argv)
    finally:
        viz._save = save
    return " ".join(titles[0].split())


def test_the_last_checkpoint_is_not_shown_beside_scores_of_other_weights(tmp_path, capsys):
    """metrics.json scores model.safetensors: a --keep-best run's best step, a finished run's
    last. `--checkpoint last` of a --keep-best run showed step 30's weights beside step 27's
    test scores as if they were theirs; a finished run resumed further and stopped read "step
    36 of 30" beside step 30's. The page says whose the scores are; the figure leaves them out
    and says so; "of N" is left out past the run's N steps."""
    import json

    from attnlab.explorer import read_data

    best = tmp_path / "best"
    assert main([*REVERSE, "--max-steps", "30", "--keep-best", "--monitor", "val_acc",
                 "--out", str(best)]) == 0
    metrics = json.loads((best / "metrics.json").read_text())
    assert metrics["best_step"] < metrics["steps"] == 30  # this seed's best is not the last
    more = tmp_path / "more"  # the same run trained on: its last checkpoint is step 36's
    assert main([*REVERSE, "--max-steps", "36", "--out", str(more)]) == 0
    resumed = shutil.copytree(best, tmp_path / "resumed")  # as `--resume` stopped at step 36
    shutil.copy(more / "checkpoints" / "last.ckpt", resumed / "checkpoints" / "last.ckpt")
    capsys.readouterr()
    scored = f"metrics.json: of model.safetensors, step {metrics['best_step']}, not these weights"
    for run, weights in ((best, "checkpoints/last.ckpt: step 30 of 30, the last saved step"),
                         (resumed, "checkpoints/last.ckpt: step 36, the last saved step")):
        page = tmp_path / f"{run.name}.html"
        _out(capsys, ["view", str(run), "--input", "1 2 3 4", "--out", str(page),
                      "--checkpoint", "last"])
        shown = read_data(page.read_text(encoding="utf-8"))["record"]["shown"]
        assert (shown["weights"], shown["metrics_of"]) == (weights, scored)
        title = _title(capsys, ["plot", "attention", str(run), "--input", "1 2 3 4", "--out",
                                str(tmp_path / f"{run.name}.png"), "--checkpoint", "last"])
        assert title.endswith(f"· {weights} · {scored}") and "accuracy" not in title
    # the weights metrics.json scores: their scores, as before
    _out(capsys, ["view", str(best), "--input", "1 2 3 4", "--out", str(tmp_path / "own.html")])
    shown = read_data((tmp_path / "own.html").read_text(encoding="utf-8"))["record"]["shown"]
    assert shown["metrics_of"] is None
    assert ["test_token_accuracy", json.dumps(metrics["test_token_accuracy"])] in shown["metrics"]
    title = _title(capsys, ["plot", "attention", str(best), "--input", "1 2 3 4", "--out",
                            str(tmp_path / "own.png")])
    assert f"test_token_accuracy {json.dumps(metrics['test_token_accuracy'])}" in title
