"""Every ``--precision`` that ``attnlab train --help`` lists works on every task: ``64`` and
``bf16-true`` used to stop with "mat1 and mat2 must have the same dtype" wherever float inputs
(one-hot symbols, digit images, feature rows) met float64 / bfloat16 weights.

For each precision × task, a 4-step run of a width-16 model must exit 0 and write a
metrics.json with the task's keys and finite values (no NaN after bfloat16 training); its
model.safetensors must be float32 (what ``attnlab.load``, ``predict`` and ``evaluate`` build),
``attnlab predict`` must answer and ``attnlab evaluate`` must reproduce the run's test metrics.
``16-mixed`` on a CPU only has to finish (Lightning may run bfloat16 instead).
"""
import csv
import json
import math
import random

import pytest
import torch
from safetensors import safe_open

import attnlab
from attnlab.cli import main

from .conftest import TINY_MODEL, task_data, tiny_args

pytestmark = pytest.mark.slow  # trains every task at every precision

PRECISIONS = ("32", "64", "bf16-mixed", "16-mixed", "bf16-true")
TRUE_DTYPE = {"64": torch.float64, "bf16-true": torch.bfloat16}  # weights trained in this dtype

SEQUENCE = ("--train-size 64 --val-size 16 --test-size 32 --seq-len 6 --num-categories 5 "
            "--batch-size 16 --no-early-stop").split()
SETS = ["--set-column", "cloud", "--label-column", "side", "--feature-columns", "x,y",
        "--batch-size", "8"]

# task id: (task, its keys in metrics.json, a predict --input, what a prediction may be)
TASKS = {
    "reverse": ("reverse", {"test_token_accuracy", "test_sequence_accuracy"}, "1 0 3", None),
    "copy": ("copy", {"test_token_accuracy", "test_sequence_accuracy"}, "1 0 3", None),
    "sort": ("sort", {"test_token_accuracy", "test_sequence_accuracy"}, "1 0 3", None),
    "anomaly": ("anomaly", {"test_accuracy"}, "0 1 2 3 10", {"0", "1", "2", "3", "4"}),
    "classify": ("classify", {"test_accuracy", "test_macro_f1"}, "the film was great",
                 {"pos", "neg"}),
    "classify-sets": ("classify", {"test_accuracy", "test_macro_f1"}, "1.5,3;2,-40;0.5,7",
                      {"left", "right"}),
    "translate": ("translate", {"test_exact_match", "test_bleu", "test_chrf"}, "342", None),
    "lm": ("lm", {"val_loss", "val_perplexity"}, "the quick", None),
}


def write_feature_sets(path, n=48, seed=0):
    """Sets of 3-6 points (x, y), one row per point; label: the sign of the set's mean x."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["cloud", "side", "x", "y"])
        for s in range(n):
            shift = rng.choice((-1.5, 1.5))
            for _ in range(rng.randint(3, 6)):
                w.writerow([f"s{s}", "right" if shift > 0 else "left",
                            f"{rng.gauss(shift, 1):.4f}", f"{rng.gauss(0, 50):.3f}"])
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("precision_data")
    return {**task_data(tmp), "sets": write_feature_sets(tmp / "clouds.csv")}


def train_args(task_id, data):
    task = TASKS[task_id][0]
    if task in ("reverse", "copy", "sort"):
        return [task, *SEQUENCE, *TINY_MODEL.split()]
    if task_id == "classify-sets":
        return [task, "--data", str(data["sets"]), *SETS, *TINY_MODEL.split()]
    smaller = {"anomaly": ["--val-sets", "16", "--test-sets", "32"],
               "translate": ["--test-size", "16"]}.get(task, [])
    return [task, *tiny_args(task, data, *smaller)]


def _json_printed(text):
    return json.loads(text[text.index("{"):])


@pytest.mark.parametrize("task_id", TASKS)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_trains_every_task(precision, task_id, data, tmp_path, capsys):
    _, keys, text, answers = TASKS[task_id]
    run = tmp_path / "run"
    argv = ["train", *train_args(task_id, data), "--out", str(run), "--precision", precision,
            "--max-steps", "4", "--warmup", "2"]
    assert main(argv) == 0, argv
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 4
    # (classify also lists the labels the test split lacks: not a number)
    numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    assert keys | {"steps", "train_seconds", "parameters"} <= set(numbers)
    assert all(math.isfinite(v) for v in numbers.values()), metrics
    for key in keys - {"val_loss", "val_perplexity"}:
        assert 0 <= metrics[key] <= (100 if key in ("test_bleu", "test_chrf") else 1), metrics

    # the weights file is float32 whatever the training precision ...
    with safe_open(run / "model.safetensors", "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}
    # ... though 64 and bf16-true really trained in their dtype (Adam's moments are kept in it)
    if precision in TRUE_DTYPE:
        ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
        moments = {v.dtype for s in ckpt["optimizer"]["state"].values()
                   for name, v in s.items() if name == "exp_avg"}
        assert moments == {TRUE_DTYPE[precision]}

    capsys.readouterr()
    assert main(["predict", str(run), "--input", text]) == 0
    prediction = capsys.readouterr().out.strip().splitlines()[-1]
    if answers is not None:
        assert prediction in answers
    elif TASKS[task_id][0] in ("reverse", "copy", "sort"):
        assert len(prediction.split()) == 3 and all(t in "01234" for t in prediction.split())

    assert main(["evaluate", str(run)]) == 0
    evaluated = _json_printed(capsys.readouterr().out)
    # the run's metrics are those of the saved float32 model, as evaluate measures them
    assert {k: evaluated[k] for k in keys} == pytest.approx({k: metrics[k] for k in keys},
                                                          rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("task_id", ["reverse", "anomaly", "classify-sets"])
def test_a_loaded_model_moved_to_another_dtype_takes_float32_inputs(task_id, data, tmp_path):
    """Library use: ``attnlab.load(run).to(dtype)`` still takes the float32 one-hot symbols,
    images or feature rows its task builds (they are cast where they enter the model)."""
    run = tmp_path / "run"
    assert main(["train", *train_args(task_id, data), "--out", str(run), "--max-steps", "2"]) == 0
    model = attnlab.load(run)
    x = {"reverse": torch.randint(5, (2, 6)), "anomaly": torch.rand(2, 5, 64),
         "classify-sets": torch.randn(2, 4, 2)}[task_id]
    expected = model(x)
    for dtype in (torch.float64, torch.bfloat16):
        out = model.to(dtype)(x)
        assert out.dtype == dtype and torch.isfinite(out).all()
        tol = 1e-5 if dtype == torch.float64 else 0.1
        torch.testing.assert_close(out.float(), expected, rtol=tol, atol=tol)


def test_after_bf16_true_training_the_computed_tables_are_exact_again(tmp_path):
    """Lightning casts the whole module to bfloat16 for ``bf16-true``, the sinusoidal table
    too; after the fit the weights go back to float32 and the table must be the exact one
    ``attnlab.load`` rebuilds, or the run's test metrics are not those of its saved model."""
    import lightning.pytorch as L

    from attnlab.training import TransformerPredictor

    torch.manual_seed(0)
    module = TransformerPredictor(5, 16, 5, 2, 1, lr=1e-3, warmup=1, max_iters=2)
    exact = module.positional_encoding.pe.clone()
    assert not torch.equal(exact.bfloat16().float(), exact)  # bfloat16 would round it
    batches = [(torch.nn.functional.one_hot(torch.randint(5, (4, 6)), 5).float(),
                torch.randint(5, (4, 6))) for _ in range(2)]
    trainer = L.Trainer(max_steps=2, precision="bf16-true", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(module, torch.utils.data.DataLoader(batches, batch_size=None))
    assert {p.dtype for p in module.parameters()} == {torch.float32}
    assert module.positional_encoding.pe.dtype == torch.float32
    assert torch.equal(module.positional_encoding.pe, exact)


@pytest.mark.slow  # trains with Lightning
def test_course_module_float32_and_exact_tables_after_an_interrupted_bfloat16_fit(tmp_path):
    """Interrupting the kernel during ``trainer.fit(precision="bf16-true")`` left the course's
    module in bfloat16 (Lightning calls no hook of the module's on an interruption): it went on
    predicting in bfloat16, and the next fit kept its positional table rounded for good."""
    import signal

    import lightning.pytorch as L

    from attnlab.training import TransformerPredictor

    class Interrupt(L.Callback):  # what the kernel's interrupt (Ctrl+C) raises mid-fit
        def on_train_batch_end(self, trainer, *args):
            raise KeyboardInterrupt

    torch.manual_seed(0)
    module = TransformerPredictor(5, 16, 5, 2, 1, lr=1e-3, warmup=1, max_iters=4)
    exact = module.positional_encoding.pe.clone()
    batches = [(torch.randint(5, (4, 6)), torch.randint(5, (4, 6))) for _ in range(2)]
    loader = torch.utils.data.DataLoader(batches, batch_size=None)
    quiet = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                 enable_model_summary=False, default_root_dir=tmp_path)
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit):  # Lightning's answer to a KeyboardInterrupt
            L.Trainer(max_steps=4, precision="bf16-true", callbacks=[Interrupt()],
                      **quiet).fit(module, loader)
    finally:
        signal.signal(signal.SIGINT, handler)  # Lightning ignores SIGINT from then on
    assert {p.dtype for p in module.parameters()} == {torch.float32}
    assert torch.equal(module.positional_encoding.pe, exact)
    L.Trainer(max_steps=2, precision="bf16-true", **quiet).fit(module, loader)  # a second fit
    assert {p.dtype for p in module.parameters()} == {torch.float32}
    assert torch.equal(module.positional_encoding.pe, exact)


@pytest.mark.slow  # imports Lightning, trains
@pytest.mark.parametrize("then", ["test", "validate"])
def test_course_module_float32_after_a_bfloat16_test_or_validate(tmp_path, then):
    """The course's fit-then-test with a bf16-true trainer left the module in bfloat16 after
    the test (the float32 restore ran after fit only), and the next fit could not restore the
    positional table exactly."""
    import lightning.pytorch as L

    from attnlab.training import TransformerPredictor

    torch.manual_seed(0)
    module = TransformerPredictor(5, 16, 5, 2, 1, lr=1e-3, warmup=1, max_iters=4)
    exact = module.positional_encoding.pe.clone()
    batches = [(torch.randint(5, (4, 6)), torch.randint(5, (4, 6))) for _ in range(2)]
    loader = torch.utils.data.DataLoader(batches, batch_size=None)
    trainer = L.Trainer(max_steps=2, precision="bf16-true", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(module, loader)
    getattr(trainer, then)(module, loader, verbose=False)
    assert {p.dtype for p in module.parameters()} == {torch.float32}
    L.Trainer(max_steps=2, precision="bf16-true", logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False,
              default_root_dir=tmp_path).fit(module, loader)
    assert torch.equal(module.positional_encoding.pe, exact)
