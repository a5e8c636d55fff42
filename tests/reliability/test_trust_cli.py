"""Trust: no silent wrong result from the commands that use a trained run (and `explain`).

Each test asserts what a user notices: the exit status, one line on stderr naming the flag,
file, setting or value, no traceback, the permissions and contents of the files written.
"""
import json
import os
import shutil
import stat
import sys

import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.runs import (atomic_write, readable, save_weights, write_json, write_metrics,
                          write_yaml)

PNG = b"\x89PNG\r\n\x1a\n"


def _fails(argv, capsys, *named):
    """``main(argv)`` exits 2 with one ``attnlab: error:`` line naming each of ``named``, prints
    nothing on stdout and no traceback; returns the line."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (argv, code, err)
    assert len(lines) == 1 and lines[0].startswith("attnlab: error: "), err
    assert "Traceback" not in err and out == "", (err, out)
    for text in named:
        assert str(text) in lines[0], (text, lines[0])
    return lines[0]


# --- 13. explain: no NaN printed as an answer ------------------------------------------------

def test_explain_overflow_in_qk_exits_2_naming_the_flag_and_value(capsys):
    line = _fails(["explain", "--q", "[[1e308,1e308,0]]"], capsys,
                  "--q", "QKᵀ", "inf", "q1", "k1")
    assert "--k" not in line  # the example's keys are small: --q is the cause
    _fails(["explain", "--q", "[[1e200,1e200,0]]", "--k", "[[1e200,0,0]]", "--v", "[[1]]"], capsys,
           "--q and --k", "QKᵀ")
    _fails(["explain", "--k", "[[1e308,0,0],[0,1,0],[0,0,1],[0,0,1]]"], capsys, "--k", "q3, k1")
    # -inf scores with a mask would have put all the weight on the blocked keys
    _fails(["explain", "--q", "[[-1e308,0,0]]", "--mask", "[[1,0,0,0]]"], capsys, "--q", "-inf")


def test_explain_numbers_beyond_float64_are_named(capsys):
    _fails(["explain", "--q", "[[1e400,0,0]]"], capsys, "--q", "row 1, column 1", "not a finite")
    _fails(["explain", "--v", f"[[1],[2],[3],[{'9' * 400}]]"], capsys, "--v", "row 4, column 1")


def test_explain_large_finite_values_give_finite_answers(capsys):
    v = "[[1e300,0,0],[0,0,0],[0,0,0],[0,0,0]]"
    assert main(["explain", "--q", "[[0,0,0]]", "--v", v]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower() and "inf" not in out.lower()
    assert "q1: [2.5e+299," in out  # a quarter of 1e300, not 300 digits


# --- 15. files honour the umask ---------------------------------------------------------------

def _modes(root):
    """{path relative to root: permission bits} of every file and directory under root."""
    found = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(base, name)
            found[os.path.relpath(path, root)] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


_UMASK_SCRIPT = """
import sys
from attnlab.cli import main
tmp = sys.argv[1]
assert main(["prepare", f"{tmp}/corpus.txt", "--out", f"{tmp}/data"]) == 0
assert main(["train", "lm", "--data", f"{tmp}/data", "--out", f"{tmp}/run", "--max-steps", "6",
             "--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward",
             "32", "--block-size", "16", "--batch-size", "8", "--val-batches", "1", "--warmup",
             "2", "--threads", "1"]) == 0
assert main(["plot", "attention", f"{tmp}/run", "--input", "the fox"]) == 0
assert main(["plot", "pe", "--out", f"{tmp}/figs/pe.png"]) == 0
"""


@pytest.mark.slow
@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755),
                                                         (0o077, 0o600, 0o700)])
def test_prepare_and_training_write_files_with_the_umask(tmp_path, umask, file_mode, dir_mode):
    import subprocess

    (tmp_path / "corpus.txt").write_text("the quick brown fox jumps over the lazy dog.\n" * 80)
    # a process of its own: a user's shell sets the umask once, before anything runs (fsspec,
    # which writes Lightning's checkpoints, reads it once per process)
    proc = subprocess.run([sys.executable, "-c", _UMASK_SCRIPT, str(tmp_path)],
                          preexec_fn=lambda: os.umask(umask), capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    written = {f"{part}/{name}": mode for part in ("data", "run", "figs")
               for name, mode in _modes(tmp_path / part).items()}
    for name in ("data/tokenizer.json", "data/meta.json", "data/train.bin",
                 "run/model.safetensors", "run/config.yaml", "run/metrics.json",
                 "run/tokenizer.json", "run/attention_input.png", "run/checkpoints/last.ckpt",
                 "figs/pe.png"):
        assert name in written, sorted(written)
    wrong = {name: oct(mode) for name, mode in written.items()
             if mode != (dir_mode if (tmp_path / name).is_dir() else file_mode)}
    assert not wrong, f"expected files {oct(file_mode)}, directories {oct(dir_mode)}: {wrong}"
    assert not [n for n in written if n.endswith(".tmp")]  # no temporary file left behind


@pytest.mark.slow
def test_every_writer_honours_the_umask(tmp_path):
    from attnlab.tokenizers import CharTokenizer
    from attnlab.viz import plot_positional_encoding

    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "a.txt", "x")
        write_json(tmp_path / "b.json", {"a": 1})
        write_yaml(tmp_path / "c.yaml", {"a": 1})
        write_metrics(tmp_path / "metrics.json", {"test_accuracy": 0.5})
        save_weights(torch.nn.Linear(2, 2), tmp_path / "model.safetensors")
        CharTokenizer.fit(["ab"]).save(tmp_path / "tokenizer.json")
        plot_positional_encoding(4, 8, tmp_path / "pe.png")
    finally:
        os.umask(old)
    modes = _modes(tmp_path)
    assert len(modes) == 7 and modes == dict.fromkeys(modes, 0o640), \
        {name: oct(mode) for name, mode in modes.items()}


def test_atomic_write_replaces_and_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "config.yaml"
    atomic_write(path, "old\n")
    with pytest.raises(TypeError):
        atomic_write(path, object())  # fails while writing: the old content stays
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]  # no temporary left over



def test_saving_weights_leaves_a_users_file_named_like_its_temporary_alone(tmp_path):
    """The weights went through a fixed ``.model.safetensors.tmp``: a user's file of that name
    was overwritten, then deleted. Now every writer goes through a new name of its own."""
    mine = tmp_path / ".model.safetensors.tmp"
    mine.write_text("my notes\n")
    save_weights(torch.nn.Linear(2, 2), tmp_path / "model.safetensors")
    assert mine.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.safetensors.tmp",
                                                          "model.safetensors"]

# --- 16. generate --stop with escapes ---------------------------------------------------------

BLANK_LINES = "hello world.\n\n" * 200


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A tiny lm run on text whose continuation soon holds a blank line."""
    tmp = tmp_path_factory.mktemp("blank")
    (tmp / "t.txt").write_text(BLANK_LINES, encoding="utf-8")
    assert main(["train", "lm", "--data", str(tmp / "t.txt"), "--out", str(tmp / "run"),
                 "--max-steps", "40", "--model-dim", "32", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "64", "--block-size", "16", "--batch-size", "16",
                 "--lr", "1e-2", "--warmup", "5", "--val-batches", "2", "--threads", "1"]) == 0
    return tmp / "run"


def _continuation(run, prompt, n, **sampling):
    model, tok = attnlab.load(run)
    new = model.stream(torch.tensor([tok.encode(prompt)]), n, slide=True, **sampling)
    return tok.decode(torch.cat(list(new), 1)[0].tolist())


@pytest.mark.slow
def test_stop_backslash_n_backslash_n_stops_at_the_first_blank_line(lm_run, capsys):
    full = _continuation(lm_run, "hello", 40)
    assert "\n\n" in full  # the model has learned the text: a blank line comes up
    # the two characters backslash and n, as a shell passes --stop "\n\n"
    assert main(["generate", str(lm_run), "--prompt", "hello", "--greedy", "--max-new-tokens",
                 "40", "--stop", r"\n\n"]) == 0
    printed = capsys.readouterr().out
    assert printed == "hello" + full[: full.index("\n\n")] + "\n"
    assert "\n\n" not in printed


@pytest.mark.slow
def test_the_docs_example_stops_at_a_blank_line(lm_run, capsys):
    # docs/language_model.md: --temperature 0.8 --top-k 40 --seed 1 --stop "\n\n"
    args = ["generate", str(lm_run), "--prompt", "hello", "--max-new-tokens", "300",
            "--temperature", "0.8", "--top-k", "40", "--seed", "1"]
    assert main(args) == 0
    without = capsys.readouterr().out
    assert main([*args, "--stop", r"\n\n"]) == 0
    with_stop = capsys.readouterr().out
    assert "\n\n" in without[:-1]  # the same sample, uncut, holds a blank line
    assert with_stop == without[: without.index("\n\n")] + "\n"


@pytest.mark.slow
def test_stop_escapes_tab_backslash_and_unknown(lm_run, capsys):
    from attnlab.commands.generate import unescape

    assert unescape(r"a\tb\\n\n") == "a\tb\\n\n"  # \\ is one backslash: "\\n" is not a newline
    line = _fails(["generate", lm_run, "--prompt", "hello", "--stop", r"\q"], capsys, "--stop",
                  r"'\q'")
    assert r"\n" in line  # says which escapes there are
    _fails(["generate", lm_run, "--prompt", "hello", "--stop", "end\\"], capsys, "--stop", "lone")
    _fails(["generate", lm_run, "--prompt", "hello", "--stop", ""], capsys, "--stop")
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    assert r"\n is a newline" in " ".join(capsys.readouterr().out.split())  # --help says so


# --- 20. readable metrics ----------------------------------------------------------------------

def test_metrics_are_rounded_to_six_significant_digits_and_integers_stay_integers(tmp_path):
    metrics = {"test_accuracy": 0.9980000257492065, "val_loss": 1.2345678912, "steps": 600,
               "parameters": 3056, "train_seconds": 12.3456789, "test_bleu": 0.0,
               "nested": {"f1": [0.30000001192092896, 1]}, "np": torch.tensor(0.25).numpy()[()],
               "flag": True}
    assert readable(metrics) == {"test_accuracy": 0.998, "val_loss": 1.23457, "steps": 600,
                                 "parameters": 3056, "train_seconds": 12.3457, "test_bleu": 0.0,
                                 "nested": {"f1": [0.3, 1]}, "np": 0.25, "flag": True}
    write_metrics(tmp_path / "metrics.json", metrics)
    text = (tmp_path / "metrics.json").read_text()
    assert '"test_accuracy": 0.998,' in text and "0.99800002" not in text
    assert '"steps": 600,' in text and '"parameters": 3056,' in text  # not 600.0
    saved = json.loads(text)
    assert type(saved["steps"]) is int and type(saved["parameters"]) is int


@pytest.mark.slow
def test_evaluate_prints_readable_numbers(reverse_run, capsys):
    assert main(["evaluate", str(reverse_run)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed and all(float(f"{v:.6g}") == v for v in printed.values()), printed


# --- the rest of their kind: broken run directories --------------------------------------------

def _copy(src, tmp_path, name="run"):
    dest = tmp_path / name
    shutil.copytree(src, dest)
    return dest


def _edit_config(run, change):
    import yaml

    path = run / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    change(cfg)
    path.write_text(yaml.safe_dump(cfg))


def _commands(task, run):
    if task == "lm":
        return [["generate", run, "--prompt", "the", "--max-new-tokens", "3"],
                ["predict", run, "--input", "the"], ["evaluate", run],
                ["plot", "attention", run, "--input", "the", "--out", run / "a.png"]]
    if task == "translate":
        return [["translate", run, "three"], ["predict", run, "--input", "three"],
                ["evaluate", run],
                ["plot", "attention", run, "--input", "three", "--out", run / "a.png"]]
    return [["predict", run, "--input", "1 2 3"], ["evaluate", run],
            ["plot", "attention", run, "--input", "1 2 3", "--out", run / "a.png"]]


def _runs(reverse_run, task_runs):
    return {"reverse": reverse_run, "lm": task_runs["lm"], "translate": task_runs["translate"]}


CONFIG_BREAKS = {  # name: (change to config.yaml, fragments the message must name)
    "no task": (lambda c: c.pop("task"), ["config.yaml", "'task'"]),
    "unknown task": (lambda c: c.update(task="juggle"), ["config.yaml", "'juggle'"]),
    "no model_dim": (lambda c: c.pop("model_dim"), ["config.yaml", "'model_dim'"]),
    "no num_layers": (lambda c: c.pop("num_layers"), ["config.yaml", "'num_layers'"]),
    "model_dim text": (lambda c: c.update(model_dim="sixteen"), ["config.yaml", "model_dim",
                                                                 "'sixteen'"]),
    "model_dim 0": (lambda c: c.update(model_dim=0), ["config.yaml", "model_dim", "0"]),
    "heads do not divide": (lambda c: c.update(num_heads=3), ["config.yaml", "num_heads", "3"]),
    "dropout 2": (lambda c: c.update(dropout=2.0), ["config.yaml", "dropout", "2.0"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("task", ["reverse", "lm", "translate"])
def test_a_broken_config_yaml_is_named_by_every_command(task, reverse_run, task_runs, tmp_path,
                                                        capsys):
    src = _runs(reverse_run, task_runs)[task]
    for name, (change, named) in CONFIG_BREAKS.items():
        run = _copy(src, tmp_path, name.replace(" ", "_"))
        _edit_config(run, change)
        for argv in _commands(task, run):
            _fails(argv, capsys, *named)
    for text, named in (("- 1\n- 2\n", ["config.yaml", "mapping"]),
                        ("", ["config.yaml", "is empty"])):
        run = _copy(src, tmp_path, f"raw{len(text)}")
        (run / "config.yaml").write_text(text)
        for argv in _commands(task, run):
            _fails(argv, capsys, *named)


@pytest.mark.slow
def test_a_setting_missing_from_config_yaml_that_the_task_needs(task_runs, tmp_path, capsys):
    run = _copy(task_runs["lm"], tmp_path)
    _edit_config(run, lambda c: c.pop("block_size"))
    for argv in _commands("lm", run):
        _fails(argv, capsys, str(run / "config.yaml"), "'block_size'")


@pytest.mark.slow
@pytest.mark.parametrize("task, missing", [("lm", "tokenizer.json"),
                                           ("translate", "tokenizer.json"),
                                           ("translate", "target_tokenizer.json")])
def test_a_missing_or_corrupt_tokenizer_is_named(task, missing, task_runs, tmp_path, capsys):
    run = _copy(task_runs[task], tmp_path)
    (run / missing).unlink()
    for argv in _commands(task, run):
        _fails(argv, capsys, run / missing)
    (run / missing).write_text('{"type": "char"}')
    for argv in _commands(task, run):
        _fails(argv, capsys, run / missing)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["reverse", "lm", "translate"])
def test_truncated_weights_are_named_by_every_command(task, reverse_run, task_runs, tmp_path,
                                                      capsys):
    run = _copy(_runs(reverse_run, task_runs)[task], tmp_path)
    weights = run / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:300])
    for argv in _commands(task, run):
        _fails(argv, capsys, weights)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["reverse", "lm", "translate"])
def test_a_run_without_metrics_json_still_works(task, reverse_run, task_runs, tmp_path, capsys):
    run = _copy(_runs(reverse_run, task_runs)[task], tmp_path)
    (run / "metrics.json").unlink()
    for argv in _commands(task, run):
        assert main([str(a) for a in argv]) == 0, argv
    assert (run / "a.png").read_bytes()[:8] == PNG


# --- plot --out ---------------------------------------------------------------------------------

def _plots(reverse_run, out):
    return [["plot", "pe", "--out", out], ["plot", "lr", "--out", out],
            ["plot", "attention", reverse_run, "--input", "1 2 3", "--out", out]]


@pytest.mark.slow
def test_plot_out_that_is_a_directory_writes_nothing_else(reverse_run, tmp_path, capsys):
    figs = tmp_path / "figs"
    figs.mkdir()
    for argv in _plots(reverse_run, figs):
        _fails(argv, capsys, "--out", figs, "directory")
    assert list(figs.iterdir()) == [] and not (tmp_path / "figs.png").exists()


@pytest.mark.slow
def test_plot_out_without_a_figure_suffix_is_refused(reverse_run, tmp_path, capsys):
    # matplotlib would have written "figure.png" and the command printed "figure"
    for bad in (tmp_path / "figure", tmp_path / "figure.txt"):
        for argv in _plots(reverse_run, bad):
            _fails(argv, capsys, "--out", bad, ".png")
    _fails(["plot", "pe", "--out", ""], capsys, "--out", "empty")
    assert list(tmp_path.iterdir()) == []
    # the suffix sets the format
    assert main(["plot", "pe", "--out", str(tmp_path / "pe.svg")]) == 0
    assert b"<svg" in (tmp_path / "pe.svg").read_bytes()[:400]


@pytest.mark.slow
def test_plot_out_under_a_file(reverse_run, tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me")
    for argv in _plots(reverse_run, afile / "sub" / "x.png"):
        _fails(argv, capsys, "--out", afile, "not a directory")
    assert afile.read_text() == "keep me"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc refuses new files")
def test_plot_out_that_cannot_be_written(reverse_run, tmp_path, capsys):
    for argv in _plots(reverse_run, "/proc/attnlab-figure.png"):
        _fails(argv, capsys, "--out", "/proc/attnlab-figure.png", "cannot write")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_plot_out_in_a_read_only_directory(reverse_run, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for argv in _plots(reverse_run, locked / "x.png"):
            _fails(argv, capsys, "--out", locked, "permission denied")
    finally:
        locked.chmod(0o700)


# --- values at the edge of their ranges ---------------------------------------------------------

@pytest.mark.slow
def test_values_at_the_edges_of_their_ranges(task_runs, capsys):
    lm, tr = task_runs["lm"], task_runs["translate"]
    gen = ["generate", lm, "--prompt", "the"]
    cases = [
        ([*gen, "--max-new-tokens", "0"], ["--max-new-tokens", "0"]),
        ([*gen, "--temperature", "inf"], ["--temperature", "inf"]),
        ([*gen, "--temperature", "nan"], ["--temperature", "nan"]),
        ([*gen, "--temperature", "1e-30"], ["--temperature", "1e-30", "--greedy"]),
        ([*gen, "--top-p", "0"], ["--top-p"]),
        ([*gen, "--top-p", "nan"], ["--top-p", "nan"]),
        ([*gen, "--top-k", "-3"], ["--top-k", "-3"]),
        (["translate", tr, "three", "--beam", "-2"], ["--beam", "-2"]),
        (["translate", tr, "three", "--beam", "100000"], ["--beam", "100000"]),
        (["translate", tr, "three", "--length-penalty", "nan"], ["--length-penalty", "nan"]),
        (["plot", "pe", "--d-model", "-1"], ["--d-model", "-1"]),
        (["plot", "pe", "--d-model", "100000000", "--max-len", "100000000"], ["--d-model"]),
        (["plot", "pe", "--max-len", "1000000"], ["--max-len", "1000000"]),
        (["plot", "lr", "--warmup", "-1"], ["--warmup", "-1"]),
        (["plot", "lr", "--max-iters", "0"], ["--max-iters", "0"]),
        (["plot", "lr", "--schedule", "noam", "--d-model", "0"], ["--d-model", "0"]),
    ]
    for argv, named in cases:
        _fails(argv, capsys, *named)


@pytest.mark.slow
def test_odd_d_model_and_a_long_schedule_still_plot(tmp_path, capsys):
    import time

    assert main(["plot", "pe", "--d-model", "7", "--max-len", "10", "--out",
                 str(tmp_path / "pe.png")]) == 0
    assert (tmp_path / "pe.png").read_bytes()[:8] == PNG
    # a billion steps are drawn from a sample, not computed one by one: CPU seconds, which a
    # busy machine does not stretch as it stretches wall time
    start = time.process_time()
    assert main(["plot", "lr", "--max-iters", "1000000000", "--warmup", "4000", "--out",
                 str(tmp_path / "lr.png")]) == 0
    assert time.process_time() - start < 60
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(tmp_path / "lr.png")
    assert (tmp_path / "lr.png").read_bytes()[:8] == PNG
