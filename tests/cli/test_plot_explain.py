"""`attnlab explain` on the look-up example and on given Q/K/V; `attnlab plot attention|pe|lr`."""
import re

import pytest
import torch

from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.models.predictor import ElementPredictor
from attnlab.runs import save_weights, write_yaml
from attnlab.tasks.base import Task

PNG = b"\x89PNG\r\n\x1a\n"


def _rows(text: str, section: str) -> list[list[float]]:
    """The q1:, q2: ... rows printed under the section starting with ``section``."""
    part = text.split(section, 1)[1]
    rows = []
    for line in part.splitlines()[1:]:
        m = re.match(r"\s+q\d+: \[(.*)\]", line)
        if not m:
            if rows:
                break
            continue
        rows.append([float(x) for x in m.group(1).split(",")])
    return rows


def test_explain_lookup_example_prints_expected_outputs(capsys):
    assert main(["explain"]) == 0
    out = capsys.readouterr().out
    for step in ("QKᵀ", "√d_k = √3", "Mask", "Softmax", "Weighted sum"):
        assert step in out
    assert _rows(out, "1. QKᵀ") == [[0, 100, 0, 0], [0, 0, 100, 100], [100, 100, 0, 0]]
    assert _rows(out, "2. Scale") == [[0, 57.735, 0, 0], [0, 0, 57.735, 57.735], [57.735, 57.735, 0, 0]]
    assert _rows(out, "4. Softmax") == [[0, 1, 0, 0], [0, 0, 0.5, 0.5], [0.5, 0.5, 0, 0]]
    assert _rows(out, "5. Weighted sum") == [[10, 0, 2], [550, 5.5, 0], [5.5, 0, 1.5]]


def test_explain_given_qkv_and_mask(capsys):
    args = ["explain", "--q", "[[1, 0], [0, 1]]", "--k", "[[1,0],[0,1]]", "--v", "[[1],[3]]"]
    assert main([*args, "--mask", "[[1, 0], [1, 1]]"]) == 0
    out = capsys.readouterr().out
    weights = _rows(out, "4. Softmax")
    assert weights[0] == [1, 0]  # the blocked key gets no weight
    w = torch.softmax(torch.tensor([0.0, 1.0]) / 2 ** 0.5, 0)
    assert weights[1] == pytest.approx(w.tolist(), abs=1e-4)
    assert _rows(out, "5. Weighted sum")[1] == pytest.approx([float(w @ torch.tensor([1.0, 3.0]))], abs=1e-4)
    assert main(["explain", "--q", "[0, 10, 0]"]) == 0  # one flat row, the example's K and V
    assert _rows(capsys.readouterr().out, "5. Weighted sum") == [[10, 0, 2]]


@pytest.mark.slow
@pytest.mark.parametrize("args, named", [
    (["--q", "[[1,0]"], "--q"),
    (["--k", "[[1,'a']]"], "--k"),
    (["--v", "[[1,2],[3]]"], "--v"),
    (["--q", "[[1,0]]"], "--k"),  # width 2 vs the example's keys of width 3
    (["--v", "[[1],[2]]"], "--v"),  # 2 values for 4 keys
    (["--mask", "[[1,0]]"], "--mask"),
    (["--mask", "[[1,2,0,1]]"], "--mask"),
])
def test_explain_errors_exit_2_naming_the_flag(args, named, capsys):
    assert main(["explain", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and named in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--q", "--k", "--v", "--mask"])
def test_explain_refuses_an_empty_matrix_rather_than_use_the_example(flag, capsys):
    # `--q ""` (an unset shell variable) printed the example's attention, as if not given
    assert main(["explain", flag, ""]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == f"attnlab: error: {flag}: '' is not a nested list of " \
                                   f"numbers, e.g. \"[[0,10,0]]\""
    assert captured.out == ""


@pytest.mark.parametrize("args, said", [
    (["--q", "[[1,0]]"], "--q has rows of 2 numbers but the example's keys (used without --k) "
                         "have rows of 3: queries and keys must have the same width d_k"),
    (["--v", "[[1],[2]]"], "the example's keys (used without --k) have 4 rows but --v has 2: "
                           "one value per key"),
    (["--k", "[[1,0,0]]"], "--k has 1 row but the example's values (used without --v) have 4: "
                           "one value per key"),
    (["--k", "[[1,0]]", "--q", "[[1,0,0]]"], "--q has rows of 3 numbers but --k has rows of 2: "
                                             "queries and keys must have the same width d_k"),
])
def test_explain_names_a_flag_only_where_it_was_given(args, said, capsys):
    """Given only --q of width 2, explain said "--k rows have 3": a flag the user never gave,
    so the mistake read as theirs; the example's matrices are named as the example's."""
    assert main(["explain", *args]) == 2
    assert capsys.readouterr().err == f"attnlab: error: {said}\n"


@pytest.fixture
def tiny_run(tmp_path):
    """A reverse run directory written without training (random weights): enough to plot."""
    cfg = {"task": "reverse", "num_categories": 6, "seq_len": 5, "model_dim": 8, "num_heads": 2,
           "num_layers": 2, "dim_feedforward": 16, "dropout": 0.0, "norm_first": False, "seed": 0,
           "test_size": 10}
    torch.manual_seed(0)
    save_weights(ElementPredictor(6, 8, 6, 2, 2, dim_feedforward=16), tmp_path / "model.safetensors")
    write_yaml(tmp_path / "config.yaml", cfg)
    return tmp_path


@pytest.mark.slow
def test_plot_attention_writes_png(tiny_run, tmp_path, capsys):
    out = tmp_path / "maps.png"
    assert main(["plot", "attention", str(tiny_run), "--input", "1 2 3", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    assert out.read_bytes()[:8] == PNG
    assert main(["plot", "attention", str(tiny_run), "--input", "1 7"]) == 2  # 7 not a symbol
    assert "'7'" in capsys.readouterr().err


def test_attention_maps_hook_labels_padding(tiny_run):
    from attnlab.tasks import get_task

    cfg = {"task": "reverse", "num_categories": 6, "seq_len": 5, "model_dim": 8, "num_heads": 2,
           "num_layers": 2, "dim_feedforward": 16, "dropout": 0.0, "norm_first": False}
    cfg = get_task("reverse").config(**cfg)
    task = get_task("reverse")
    maps, x_labels, y_labels = task.runtime().attention_maps(task, tiny_run, cfg, "4 5")
    assert len(maps) == 2 and maps[0].shape == (2, 5, 5)
    assert x_labels == ["(0)", "(0)", "(0)", "4", "5"]  # the keys: the padded input
    # the queries: the model's output at each row, the answer's two first, the rest in ()
    outputs = task.runtime().predict_many(task, tiny_run, cfg, ["4 5"], ["--input"])[0]
    assert y_labels[:2] == outputs["prediction"].split()
    assert all(label.startswith("(") for label in y_labels[2:])


def test_task_without_attention_hook_is_a_usage_error():
    task = Task()
    task.name = "demo"
    with pytest.raises(UsageError, match="task 'demo' has no runtime: .* or plot attention"):
        task.runtime().attention_maps(task, None, {}, "x")


@pytest.mark.slow
def test_plot_pe_and_lr_write_pngs(tmp_path, capsys):
    pe = tmp_path / "pe.png"
    assert main(["plot", "pe", "--d-model", "16", "--max-len", "32", "--out", str(pe)]) == 0
    assert pe.read_bytes()[:8] == PNG
    for schedule in ("cosine", "both"):  # "both": the cosine and the Noam panels
        lr = tmp_path / f"lr-{schedule}.png"
        assert main(["plot", "lr", "--schedule", schedule, "--warmup", "10", "--max-iters", "100",
                     "--out", str(lr)]) == 0
        assert lr.read_bytes()[:8] == PNG
    capsys.readouterr()
    assert main(["plot", "lr", "--warmup", "-1"]) == 2
    assert "--warmup" in capsys.readouterr().err
    assert main(["plot", "pe", "--d-model", "0"]) == 2
    assert "--d-model" in capsys.readouterr().err


@pytest.mark.parametrize("schedule", ["cosine", "wsd", "linear", "constant"])
def test_plot_lr_refuses_d_model_where_no_noam_curve_is_drawn(schedule, tmp_path, capsys):
    # --d-model is Noam's alone: with another schedule the figure came out the same, unsaid
    out = tmp_path / "lr.png"
    assert main(["plot", "lr", "--schedule", schedule, "--d-model", "64", "--out",
                 str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab: error: --d-model 64 is Noam's (its rate scales by d_model^-0.5); "
        f"--schedule {schedule} draws no Noam curve (noam, both or all do)")
    assert not out.exists()


def test_lr_curve_matches_the_schedulers():
    from attnlab.schedulers import cosine_warmup_factor, noam_factor
    from attnlab.viz import lr_curve

    cos = lr_curve("cosine", warmup=10, max_iters=100, lr=0.5)
    assert cos[0] == 0 and cos[10] == pytest.approx(0.5 * cosine_warmup_factor(10, 10, 100))
    assert cos[100] == pytest.approx(0.0, abs=1e-12)
    noam = lr_curve("noam", warmup=10, max_iters=50, d_model=64)
    assert noam[10] == pytest.approx(noam_factor(10, 64, 10)) and max(noam) == noam[10]


def test_plot_lr_draws_a_run_trained_with_warmup_0(tmp_path, monkeypatch):
    """attnlab train takes --warmup 0 (no warm-up), and plot lr refused it ("--warmup must be
    a positive integer, got 0"): the schedule such a run trained with could not be drawn.
    Each curve starts at its peak."""
    from attnlab import viz
    from attnlab.schedulers import noam_factor

    drawn = {}
    monkeypatch.setattr(viz, "plot_lr_schedule", lambda curves, out, **_: drawn.update(curves))
    assert main(["plot", "lr", "--schedule", "all", "--warmup", "0", "--max-iters", "20",
                 "--out", str(tmp_path / "lr.png")]) == 0
    assert len(drawn) == 5
    for label, curve in drawn.items():
        peak = noam_factor(1, 512, 1) if label.startswith("Noam") else 1.0
        assert curve[0] == pytest.approx(peak, rel=1e-12) and max(curve) == curve[0], label


@pytest.mark.slow
def test_plot_attention_rejects_mismatched_labels(tmp_path):
    from attnlab.viz import plot_attention

    with pytest.raises(ValueError, match="labels"):
        plot_attention(torch.rand(2, 3, 4), list("abc"), list("abc"), tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"\(H, T_q, T_k\)"):
        plot_attention(torch.rand(2, 2, 3, 4), list("abcd"), list("abc"), tmp_path / "x.png")
    # a list of layers, a batch of one, a single head: rows = layers, columns = heads
    path = plot_attention([torch.rand(1, 2, 3, 4), torch.rand(2, 3, 4)], list("abcd"), list("abc"),
                          tmp_path / "ok.png", title="two layers")
    assert path.read_bytes()[:8] == PNG


@pytest.mark.slow
def test_commands_that_do_not_train_never_import_lightning_or_tensorboard(tiny_run, tmp_path):
    import subprocess
    import sys

    script = f"""
import sys
from attnlab.cli import main
run = {str(tiny_run)!r}
for argv in (["explain"], ["predict", run, "--input", "1 2"], ["evaluate", run],
             ["plot", "attention", run, "--input", "1 2 3", "--out", {str(tmp_path / "a.png")!r}],
             ["plot", "pe", "--out", {str(tmp_path / "pe.png")!r}],
             ["plot", "lr", "--out", {str(tmp_path / "lr.png")!r}]):
    assert main(argv) == 0, argv
heavy = ("lightning", "pytorch_lightning", "tensorboard", "torch.utils.tensorboard",
         # nor what would only slow their start on a laptop (torch._dynamo: training's
         # optimiser step imports it)
         "transformers", "pandas", "scipy", "torchmetrics", "sklearn", "torch._dynamo")
loaded = sorted(m for m in sys.modules if m in heavy or m.split(".")[0] in heavy)
print("LOADED", loaded)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "LOADED []"


def _refused(argv, capsys, *named):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and all(n in err for n in named), err


@pytest.mark.slow
def test_no_figure_is_replaced_without_being_named(tiny_run, tmp_path, monkeypatch, capsys):
    """`plot attention RUN --input X` once replaced an earlier attention_input.png, `plot pe`
    and `plot lr` their files in the working directory: a default file that exists is refused
    (exit 2, one line naming it and --out); one named with --out is replaced."""
    default = tiny_run / "attention_input.png"
    assert main(["plot", "attention", str(tiny_run), "--input", "1 2 3"]) == 0
    before = default.read_bytes()
    _refused(["plot", "attention", str(tiny_run), "--input", "4 5"], capsys, str(default),
             "--out")
    assert default.read_bytes() == before
    assert main(["plot", "attention", str(tiny_run), "--input", "4 5", "--out",
                 str(default)]) == 0  # named: the user asked
    assert default.read_bytes() != before
    monkeypatch.chdir(tmp_path)
    for argv, name in ((["plot", "pe"], "positional_encoding.png"),
                       (["plot", "lr"], "lr_cosine.png")):
        (tmp_path / name).write_bytes(b"mine")
        _refused(argv, capsys, name, "--out")
        assert (tmp_path / name).read_bytes() == b"mine"


@pytest.mark.parametrize("name", ["attention.png", "confusion.png"])
def test_a_runs_own_figure_is_never_replaced(tiny_run, capsys, name):
    """`plot attention RUN --out RUN/attention.png` must not replace the figure training made,
    nor `--out RUN/confusion.png` a classify run's confusion matrix (it once did)."""
    made = tiny_run / name
    made.write_bytes(b"training's figure")
    _refused(["plot", "attention", str(tiny_run), "--input", "1 2", "--out", str(made)], capsys,
             str(made), "--out")
    assert made.read_bytes() == b"training's figure"


def test_a_figure_title_holds_up_to_120_characters_of_the_input():
    """The figure's title once cut the input at 60 characters with no mark (a translation's
    source, "... seven hundred and sev'"); the title now wraps, so it holds twice that."""
    from attnlab.commands.plot import shown_input

    source = "nine hundred and ninety-eight thousand seven hundred and seventy-six"
    assert shown_input(f"  {source} ", 120) == source
    long = " ".join([source] * 3)
    assert shown_input(long, 120) == long[:119] + "…"


@pytest.mark.parametrize("args, said", [
    # a batch's tolist() (B, T, d) pasted, or a trailing comma that makes a tuple of the
    # matrix: explain said "--q: [1, 2, 3] is not a finite number", of three finite numbers
    (["--q", "[[[0,10,0]]]"], "--q: row 1, column 1 is a list ([0, 10, 0]), not a number: give "
                              "a 2-D list of numbers, one inner list per row, e.g. \"[[0,10,0]]\""),
    (["--k", "[[10,0,0],[0,10,0],[0,0,10],[0,0,10]],"],
     "--k: row 1, column 1 is a list ([10, 0, 0]), not a number: give a 2-D list of numbers, "
     "one inner list per row, e.g. \"[[0,10,0]]\""),
    # with one query the two shapes it named were one: "must be 1×4 (queries × keys) or 1×4"
    (["--q", "[[0,10,0]]", "--mask", "[[1,1,0,0],[1,1,1,1]]"],
     "--mask is 2×4; it must be 1×4 (queries × keys)"),
    (["--mask", "[[1,1,0,0],[1,1,1,1]]"],
     "--mask is 2×4; it must be 3×4 (queries × keys) or 1×4 (one row for all)"),
])
def test_explain_says_what_shape_it_needs(args, said, capsys):
    assert main(["explain", *args]) == 2
    assert capsys.readouterr().err == f"attnlab: error: {said}\n"
