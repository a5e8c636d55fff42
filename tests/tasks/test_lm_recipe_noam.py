"""``--recipe fast --schedule noam``: the recipe's --lr is a rate (3e-3) chosen for its wsd;
Noam reads --lr as a factor (lr = factor·D^-0.5·min(...)), so taken silently it trained at a
peak of about 1e-4. Refused, as a run's config.yaml's --lr is under another schedule, unless
--lr is given; before a run directory is written."""
import pytest

from attnlab.cli import main
from attnlab.commands.train import build_config
from attnlab.schedulers import noam_factor
from attnlab.tasks.lm.recipes import RECIPES

TEXT = "abcabdabcabe " * 300 + "\n"
# were it not refused, the run would be this small
TINY = ["--max-steps", "1", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
        "--dim-feedforward", "16", "--block-size", "8", "--batch-size", "2",
        "--val-batches", "1", "--threads", "1"]


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_noam_over_a_recipe_without_lr_is_refused_naming_both(tmp_path, capsys, recipe):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "r"
    code = main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out", str(out),
                 "--recipe", recipe, "--schedule", "noam", *TINY])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err.count("\n") == 0
    assert f"--recipe {recipe}" in err and "--schedule noam" in err and "give --lr" in err


def test_noam_over_the_recipe_from_a_config_file_is_refused_too(tmp_path, capsys):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "c.yaml").write_text("schedule: noam\n", encoding="utf-8")
    code = main(["train", "lm", "--data", str(tmp_path / "small.txt"), "--out",
                 str(tmp_path / "r"), "--recipe", "fast", "--config", str(tmp_path / "c.yaml"), *TINY])
    assert code == 2 and "give --lr" in capsys.readouterr().err


def test_noam_over_a_recipe_trains_with_the_factor_given(tmp_path, capsys):
    (tmp_path / "small.txt").write_text(TEXT, encoding="utf-8")
    cfg = build_config("lm", {"data": str(tmp_path / "small.txt"), "out": str(tmp_path / "r"),
                              "recipe": "fast-small", "schedule": "noam", "lr": 1.0})
    assert (cfg.schedule, cfg.lr) == ("noam", 1.0)
    # the factor 1 peaks at a rate of the recipe's size; its 3e-3 as the factor did not
    peak = noam_factor(cfg.warmup, cfg.model.model_dim, cfg.warmup, cfg.lr)
    assert RECIPES["fast-small"]["lr"] < peak
    assert noam_factor(cfg.warmup, cfg.model.model_dim, cfg.warmup,
                       RECIPES["fast-small"]["lr"]) < RECIPES["fast-small"]["lr"] / 10
    assert "--lr 1.0 (the recipe's --lr 0.003)" in capsys.readouterr().err
