"""Training flags of the schedule, accumulation and label smoothing given wrong: one line,
exit 2, before a run directory; given right, config.yaml records the schedule the run trains
with; `plot lr` draws every schedule and refuses what train refuses."""
import pytest
import torch

from attnlab.cli import main
from attnlab.commands.train import build_config


@pytest.mark.parametrize("flags, message", [
    (["--lr", "0.001", "--min-lr", "0.01"],
     "--min-lr 0.01 is above --lr 0.001: the schedule decays from --lr down to --min-lr"),
    (["--schedule", "wsd", "--cooldown", "1.5"], "--cooldown must be in (0, 1), got 1.5"),
    (["--schedule", "wsd", "--cooldown", "0"], "--cooldown must be in (0, 1), got 0.0"),
    (["--cooldown", "0.3"],
     "--cooldown 0.3 is the decay share of --schedule wsd, not of --schedule cosine"),
    (["--schedule", "noam", "--min-lr", "0"],
     "--min-lr 0.0 with --schedule noam: Noam's rate has no floor (--lr is its factor)"),
    (["--schedule", "constant", "--min-lr", "0"],
     "--min-lr 0.0 with --schedule constant: constant holds --lr to the end"),
    # Noam's AdamW trains with the paper's beta2: --beta2 0.9 was silently unused, and
    # config.yaml recorded beta2: 0.9 for a run that trained with 0.98
    (["--schedule", "noam", "--beta2", "0.9"], "--beta2: --schedule noam trains with the "
     "paper's beta2 0.98 (and eps 1e-9); give another --schedule to set it"),
    (["--accumulate", "0"], "--accumulate must be a positive integer, got 0"),
    (["--label-smoothing", "1"], "--label-smoothing must be in [0, 1), got 1.0"),
])
def test_a_bad_schedule_or_accumulation_is_one_line_before_a_run_directory(flags, message,
                                                                          tmp_path, capsys):
    out = tmp_path / "run"
    task = "lm" if "--label-smoothing" in flags else "reverse"
    data = ["--data", str(tmp_path / "corpus.txt")] if task == "lm" else []
    assert main(["train", task, *data, *flags, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"attnlab: error: {message}"
    assert not out.exists()


def test_a_config_file_is_checked_by_the_same_rule(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("schedule: linear\nlr: 0.001\nmin_lr: 0.5\n")
    assert main(["train", "reverse", "--config", str(config), "--out", str(tmp_path / "r")]) == 2
    assert "--min-lr 0.5 is above --lr 0.001" in capsys.readouterr().err


def test_noam_without_beta2_and_beta2_with_another_schedule_still_train():
    assert build_config("reverse", {"schedule": "noam"}).schedule == "noam"
    assert build_config("reverse", {"schedule": "linear", "beta2": 0.95}).beta2 == 0.95


def test_a_noam_run_records_the_beta2_its_adamw_takes(tmp_path):
    """Noam's AdamW takes the paper's 0.98; config.yaml recorded the task's default (0.999,
    an lm's 0.99), a β₂ the run never trained with. The recorded value is accepted back, as a
    flag and as --config of the run's own config.yaml."""
    from attnlab.runs import write_yaml
    from attnlab.training.module import make_optimizer

    cfg = build_config("reverse", {"schedule": "noam"})
    optimizer, _ = make_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg, model_dim=8,
                                  max_steps=10)
    assert cfg.beta2 == optimizer.param_groups[0]["betas"][1] == 0.98
    assert build_config("reverse", {"schedule": "noam", "beta2": 0.98}).beta2 == 0.98
    write_yaml(tmp_path / "config.yaml", build_config("reverse", {"schedule": "noam"}).record())
    assert build_config("reverse", {"config": str(tmp_path / "config.yaml")}).beta2 == 0.98


def test_wsd_and_linear_record_the_defaults_they_train_with():
    cfg = build_config("reverse", {"schedule": "wsd"})
    assert (cfg.cooldown, cfg.min_lr) == (0.2, 0.0)
    cfg = build_config("reverse", {"schedule": "linear", "min_lr": 1e-4})
    assert (cfg.cooldown, cfg.min_lr) == (None, 1e-4)
    cfg = build_config("reverse", {})  # the default stays the course's cosine
    assert (cfg.schedule, cfg.min_lr, cfg.accumulate) == ("cosine", None, 1)


@pytest.mark.slow
def test_plot_lr_draws_every_schedule_and_refuses_what_train_refuses(tmp_path, capsys):
    out = tmp_path / "all.png"
    assert main(["plot", "lr", "--schedule", "all", "--min-lr", "0.1", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["plot", "lr", "--schedule", "noam", "--min-lr", "0.1",
                 "--out", str(tmp_path / "n.png")]) == 2
    assert capsys.readouterr().err.strip() == (
        "attnlab: error: --min-lr 0.1 with --schedule noam: Noam's rate has no floor "
        "(--lr is its factor)")
    assert not (tmp_path / "n.png").exists()


def test_the_warmup_warning_reads_each_schedule():
    """Noam's warning reads the model's width from the run config (it raised AttributeError:
    the optimiser's settings hold no width); a decaying schedule whose warm-up fits reaches
    --lr and says nothing."""
    from attnlab.training.engine import warmup_note

    noam = build_config("reverse", {"schedule": "noam", "warmup": 4000, "max_steps": 100})
    assert "the Noam schedule reaches 0.02 of its peak" in warmup_note(noam, 100)  # 99/4000
    wsd = build_config("reverse", {"schedule": "wsd", "warmup": 50, "max_steps": 100})
    assert warmup_note(wsd, 100) is None
    long = build_config("reverse", {"schedule": "linear", "warmup": 400, "max_steps": 100})
    assert "peaks at 0.25 x --lr" in warmup_note(long, 100)


@pytest.mark.parametrize("schedule", ["wsd", "linear", "constant", "cosine", "noam"])
def test_the_warmup_warning_says_the_highest_rate_a_step_trains_at(schedule):
    """A 20-step run trains at the schedule's e = 0..19 (metrics.csv's lr column: 0.0 ...
    19/30 of --lr for wsd with --warmup 30, at its steps 1..20); the warning read e = 20 too,
    never trained, and said "peaks at 0.67 x --lr 0.001 (step 20)" (Noam: "reaches 0.67 of
    its peak") where the run peaked at 0.63. It names the step as metrics.csv counts it."""
    from attnlab.training.engine import warmup_note
    from attnlab.training.module import make_optimizer

    settings = {"schedule": schedule, "warmup": 30, "max_steps": 20, "lr": 1e-3}
    cfg = build_config("reverse", settings)
    opt, sched = make_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg, model_dim=32,
                                max_steps=20)
    rates = []
    for _ in range(20):  # the rate each of the 20 steps trains at
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    if schedule == "noam":
        peak = sched.get_lr_factor(30)  # the rate at the end of the warm-up, never reached
        assert f"reaches {max(rates) / peak:.2f} of its peak" in warmup_note(cfg, 20)
        assert f"{max(rates) / peak:.2f}" == "0.63"
        return
    top = max(range(20), key=rates.__getitem__)
    # the step as logs/metrics.csv counts it: rates[0] is the rate of step 1
    shown = f"peaks at {rates[top] / 1e-3:.2f} x --lr 0.001 (step {top + 1})"
    assert shown in warmup_note(cfg, 20), warmup_note(cfg, 20)
