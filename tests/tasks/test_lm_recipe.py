"""``attnlab train lm --recipe fast``: it sets what its declaration says (config.yaml records
the name and every setting), a flag given wins over the recipe and is named in one line, a
recipe name that does not exist is refused before a run directory; and the time-to-loss
benchmark's reading of a run's metrics.csv and its --attnlab-shape."""
import pytest
import yaml

from attnlab.cli import main
from attnlab.commands.train import build_config
from attnlab.tasks.lm.recipes import RECIPES
from benchmarks.time_to_loss import SHAPES, attnlab_flags, attnlab_shape, loss_curve
from benchmarks.time_to_loss import main as time_to_loss_main
from benchmarks.time_to_loss import read_nanogpt_curve, time_to_loss, write_curves

TEXT = "abcabdabcabe " * 300 + "\n"
TINY = ["--max-steps", "3", "--model-dim", "32", "--num-heads", "4", "--num-layers", "1",
        "--dim-feedforward", "48", "--block-size", "16", "--batch-size", "8",
        "--val-batches", "2", "--threads", "1", "--precision", "32"]


def _recorded(cfg, name):
    return getattr(cfg.model, name) if name in dict(cfg.model) else getattr(cfg, name)


@pytest.mark.slow
def test_the_recipe_sets_every_setting_it_declares_and_config_yaml_records_them(tmp_path):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(out),
                 "--recipe", "fast", *TINY]) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["recipe"] == "fast"
    assert {k: saved[k] for k in RECIPES["fast"]} == RECIPES["fast"]
    # and without --recipe, lm's defaults (the recipe changes something a user would see)
    plain = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "p")})
    assert plain.recipe is None
    assert {k: _recorded(plain, k) for k in RECIPES["fast"]} != RECIPES["fast"]


def test_a_flag_given_wins_over_the_recipe_and_is_named_in_one_line(tmp_path, capsys):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                              "recipe": "fast", "lr": 1e-3, "positional": "learned"})
    assert (cfg.lr, cfg.model.positional) == (1e-3, "learned")
    assert (cfg.schedule, cfg.model.norm) == ("wsd", "layer")  # the rest is the recipe's
    err = capsys.readouterr().err.strip()
    assert err == ("--recipe fast: given, and used instead: --positional learned (the "
                   "recipe's --positional rope), --lr 0.001 (the recipe's --lr 0.003)")
    # another --schedule: the recipe's wsd decay share (--cooldown) goes with its wsd
    cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                              "recipe": "fast", "schedule": "cosine", "min_lr": 1e-4})
    assert (cfg.schedule, cfg.cooldown) == ("cosine", None)
    assert capsys.readouterr().err.strip() == ("--recipe fast: given, and used instead: "
                                               "--schedule cosine (the recipe's --schedule wsd)")
    # an --arch given sets its parts over the recipe's, and is named the same way
    cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                              "recipe": "fast", "arch": "gpt2"})
    assert (cfg.model.positional, cfg.model.norm, cfg.model.bias) == ("learned", "layer", True)
    assert "--positional learned (the recipe's --positional rope)" in capsys.readouterr().err
    # the recipe alone: nothing to say
    build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                        "recipe": "fast"})
    assert capsys.readouterr().err == ""


def test_the_recipes_beta1_is_0_8_and_a_beta1_given_wins(tmp_path, capsys):
    """AdamW's beta1 0.8 reached nanoGPT's loss in 300 steps where 0.9 took 350 (both seeds,
    benchmarks/RESULTS.md); a --beta1 given, or a --config key, wins and is named."""
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    base = {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r")}
    assert build_config("lm", {**base, "recipe": "fast"}).beta1 == 0.8
    assert build_config("lm", base).beta1 == 0.9
    assert capsys.readouterr().err == ""
    assert build_config("lm", {**base, "recipe": "fast", "beta1": 0.9}).beta1 == 0.9
    assert capsys.readouterr().err.strip() == ("--recipe fast: given, and used instead: "
                                               "--beta1 0.9 (the recipe's --beta1 0.8)")
    (tmp_path / "c.yaml").write_text("beta1: 0.85\n")
    assert build_config("lm", {**base, "recipe": "fast",
                               "config": str(tmp_path / "c.yaml")}).beta1 == 0.85
    # named as the file's, not as "given" (a run's own config.yaml records every setting, so
    # a --recipe over it trains none of its own: the line says where each value came from)
    assert capsys.readouterr().err.strip() == (
        f"--recipe fast: from --config {tmp_path / 'c.yaml'}, used instead: --beta1 0.85 "
        "(the recipe's --beta1 0.8)")


def test_an_unknown_recipe_is_refused_before_a_run_directory(tmp_path, capsys):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(out),
                 "--recipe", "fastest"]) == 2
    assert "argument --recipe: invalid choice: 'fastest'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("flags, said", [
    (["--model-dim", "66", "--num-heads", "6"], " (--recipe fast-small sets --positional rope)"),
    (["--min-lr", "1"], " (--recipe fast-small sets --lr 0.003)"),
    (["--model-dim", "66", "--num-heads", "6", "--positional", "rope"], ""),  # given: theirs
])
def test_a_refusal_of_a_setting_the_recipe_chose_names_the_recipe(tmp_path, capsys, flags,
                                                                  said):
    """`--recipe fast-small --model-dim 66 --num-heads 6` was told "--positional rope rotates
    pairs of channels", a flag the user never wrote."""
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    assert main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(out),
                 "--recipe", "fast-small", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f"{said}\n") and not out.exists()
    if not said:
        assert "--recipe" not in err


def test_time_to_loss_is_the_first_validation_at_or_below_the_target(tmp_path):
    path = tmp_path / "metrics.csv"
    # training rows (no val_loss) are skipped; equal to the target counts as reached
    path.write_text("step,train_seconds,train_loss,val_loss\n"
                    "5,0.8,2.10,\n10,1.6,1.90,\n10,1.6,,1.80\n20,3.3,,1.25\n"
                    "30,5.1,,1.20\n40,6.9,,1.10\n")
    assert loss_curve(path) == [(1.6, 10, 1.80), (3.3, 20, 1.25), (5.1, 30, 1.20),
                                (6.9, 40, 1.10)]
    assert time_to_loss(path, 1.20) == (5.1, 30)
    assert time_to_loss(path, 1.5) == (3.3, 20)
    assert time_to_loss(path, 1.0) is None


def test_the_plot_csv_gives_nanogpts_curve_back_to_nanogpt_from(tmp_path):
    path = tmp_path / "curves.csv"
    write_curves(path, {"nanoGPT": [(500, 60.0, 0.3172), (1000, 120.0, 0.2728)],
                        "attnlab --recipe fast": [(100, 14.0, 0.5), (400, 56.0, 0.27)]})
    # nanoGPT's rows only, by iteration, in order: its last loss is the target
    assert read_nanogpt_curve(path) == [(500, 0.3172), (1000, 0.2728)]
    # a CSV without steps (an older --plot's) is refused, not read as iteration 0
    old = tmp_path / "old.csv"
    old.write_text("side,train_seconds,val_loss\nnanoGPT,885.9,0.2728\n")
    with pytest.raises(SystemExit, match="no nanoGPT rows with a step column"):
        read_nanogpt_curve(old)


def test_attnlab_shape_trains_attnlab_at_that_size_and_leaves_nanogpts_alone():
    cpu = SHAPES["cpu"]
    flags = attnlab_flags(attnlab_shape(cpu, "2x96x3"), 500, 25, 1)

    def value(flag):
        return flags[flags.index(flag) + 1]
    assert [value(f) for f in ("--num-layers", "--model-dim", "--num-heads",
                               "--dim-feedforward", "--block-size", "--batch-size")] == \
        ["2", "96", "3", "256", "64", "12"]  # SwiGLU 8/3 of the new width; block, batch kept
    assert (cpu["layers"], cpu["width"], cpu["heads"]) == (4, 128, 4)  # nanoGPT's not changed
    assert attnlab_shape(cpu, None) is cpu


@pytest.mark.parametrize("text, says", [("2x96", "LAYERSxWIDTHxHEADS"),
                                        ("2x0x3", "LAYERSxWIDTHxHEADS"),
                                        ("2x96x5", "not a multiple of the heads 5")])
def test_a_bad_attnlab_shape_is_refused_before_anything_runs(monkeypatch, tmp_path, text, says):
    # no --nanogpt: a good shape would print "skipped"; a bad one stops first, naming the flag
    monkeypatch.delenv("NANOGPT", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["time_to_loss", "--attnlab-shape", text])
    with pytest.raises(SystemExit, match=f"--attnlab-shape {text}: .*{says}"):
        time_to_loss_main()
    assert list(tmp_path.iterdir()) == []


def test_fast_small_is_fast_at_the_benchmarks_2x80x2(tmp_path, capsys):
    """``--recipe fast-small`` trains what time_to_loss measured as ``--attnlab-shape
    2x80x2`` (``--recipe fast`` with that size, SwiGLU's width from ``swiglu_width``), and
    a size flag given wins over it as over any of a recipe's settings."""
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    base = {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r")}
    small = build_config("lm", {**base, "recipe": "fast-small"})
    shape = attnlab_shape(SHAPES["cpu"], "2x80x2")
    flags = attnlab_flags(shape, 500, 25, 1)
    sized = dict(zip((f[2:].replace("-", "_") for f in flags[2:10:2]), flags[3:10:2]))
    assert sized == {"model_dim": "80", "num_heads": "2", "num_layers": "2",
                     "dim_feedforward": "216"}
    fast = build_config("lm", {**base, "recipe": "fast", **{k: int(v) for k, v in sized.items()}})
    capsys.readouterr()
    assert dict(small.model) == dict(fast.model)
    assert {k: _recorded(small, k) for k in RECIPES["fast"]} == RECIPES["fast"]
    assert build_config("lm", {**base, "recipe": "fast-small", "model_dim": 96,
                               "num_heads": 3}).model.model_dim == 96
    assert capsys.readouterr().err.strip() == (
        "--recipe fast-small: given, and used instead: --model-dim 96 (the recipe's "
        "--model-dim 80), --num-heads 3 (the recipe's --num-heads 2)")


def test_the_docs_parameter_counts_of_fast_small_are_the_models(tmp_path):
    """docs/language_model.md gives fast-small's parameters for the benchmark's vocabulary and
    for another: each is what the recipe builds (the count grows with the vocabulary, so a
    user's text gives another number than the benchmark's)."""
    import re
    from pathlib import Path

    from attnlab.tasks.lm.runtime import build_model

    docs = (Path(__file__).parents[2] / "docs" / "language_model.md").read_text()
    part = docs[docs.index("### Smaller is sooner"):]
    first = re.search(r"([\d,]+) parameters\s+with the benchmark's vocabulary of (\d+)", part)
    other = re.search(r"([\d,]+) for a text of (\d+)\s+characters", part)
    assert first and other
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    base = {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
            "recipe": "fast-small"}
    for count, vocab in (first.groups(), other.groups()):
        cfg = build_config("lm", {**base, "vocab_size": int(vocab)})
        model = build_model(cfg)
        assert sum(p.numel() for p in model.parameters()) == int(count.replace(",", ""))


def test_the_docs_noam_peaks_of_the_recipes_rate_are_noams(tmp_path):
    """docs/language_model.md says where the recipe's --lr 3e-3, taken as Noam's factor, would
    peak for each recipe's width: that peak, to the 2 digits the page gives, is
    ``NoamScheduler``'s at the recipe's --model-dim and --warmup."""
    import re
    from pathlib import Path

    import torch

    from attnlab.schedulers import NoamScheduler

    docs = (Path(__file__).parents[2] / "docs" / "language_model.md").read_text()
    said = re.search(r"would\s+peak at ([\d.e-]+) \(`fast`, model width (\d+)\) or "
                     r"([\d.e-]+) \(`fast-small`, width (\d+)\)", docs)
    assert said, "the page no longer says where noam would peak"
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    for recipe, peak, width in (("fast", *said.groups()[:2]), ("fast-small", *said.groups()[2:])):
        cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                                  "recipe": recipe})
        assert _recorded(cfg, "model_dim") == int(width)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
        noam = NoamScheduler(optimizer, int(width), warmup=cfg.warmup)
        rates = [noam.get_last_lr()[0]]
        for _ in range(3 * cfg.warmup):
            optimizer.step()
            noam.step()
            rates.append(noam.get_last_lr()[0])
        assert float(f"{max(rates):.2g}") == float(peak), recipe
