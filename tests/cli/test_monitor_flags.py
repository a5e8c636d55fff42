"""--monitor, --keep-best, --patience, --min-delta and translate's --val-bleu refused before a
run starts: exit 2, one line naming the flag (and, for a metric the task does not compute, the
ones it does), no run directory written."""
import pytest

from attnlab.cli import main
from attnlab.commands.train import build_config
from attnlab.runs import write_config
from attnlab.settings import VAL_METRICS
from attnlab.tasks import available_tasks


def _refused(argv, capsys):
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("flags, message", [
    (["--monitor", "val_bleu", "--patience", "2"],
     "--monitor val_bleu: this run computes val_loss, val_acc, val_seq_acc at each validation"),
    (["--monitor", "val_acc"], "--monitor val_acc chooses what --keep-best and --patience watch"),
    (["--min-delta", "0.1"], "--min-delta 0.1 is the gain that ends --patience's wait"),
    (["--keep-best", "--min-delta", "0.1"], "--min-delta 0.1 is the gain that ends --patience's "
                                            "wait (--keep-best keeps the best whatever its gain)"),
    (["--patience", "0"], "--patience must be a positive integer, got 0"),
    (["--patience", "-2"], "--patience must be a positive integer, got -2"),
    (["--patience", "2", "--min-delta", "-0.5"], "--min-delta must be >= 0, got -0.5"),
    (["--keep-best", "--strategy", "fsdp"], "--keep-best copies the whole model"),
])
def test_bad_monitoring_flags_are_refused_in_one_line(flags, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert message in _refused(["train", "reverse", "--out", str(out), *flags], capsys)
    assert not out.exists()


def test_translate_computes_bleu_only_with_val_bleu(tmp_path, capsys):
    out = tmp_path / "run"
    err = _refused(["train", "translate", "--out", str(out), "--keep-best", "--monitor",
                    "val_chrf"], capsys)
    assert err.endswith("--monitor val_chrf: computed with --val-bleu N only (N validation "
                        "pairs decoded at each validation); this run computes val_loss, "
                        "val_token_accuracy")
    assert "--val-bleu must be a positive integer, got 0" in _refused(
        ["train", "translate", "--out", str(out), "--val-bleu", "0"], capsys)
    assert not out.exists()


def test_lm_without_val_every_validates_only_at_its_end_so_patience_is_refused(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog.\n" * 40)
    out = tmp_path / "run"
    err = _refused(["train", "lm", "--data", str(corpus), "--out", str(out), "--patience", "3"],
                   capsys)
    assert err.endswith("--patience 3: lm validates at the end of the run only; give "
                        "--val-every N")
    assert not out.exists()


def test_resume_with_another_monitor_or_patience_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    write_config(out, build_config("reverse", {"out": str(out), "keep_best": True,
                                               "monitor": "val_acc", "patience": 3}))
    err = _refused(["train", "reverse", "--out", str(out), "--resume", "--monitor", "val_loss"],
                   capsys)
    assert "--monitor val_loss (the run has val_acc)" in err
    err = _refused(["train", "reverse", "--out", str(out), "--resume", "--patience", "5"], capsys)
    assert "--patience 5 (the run has 3)" in err
    # a run that did not keep its best cannot start keeping it: its earlier validations' weights
    # are gone
    write_config(out, build_config("reverse", {"out": str(out)}))
    err = _refused(["train", "reverse", "--out", str(out), "--resume", "--keep-best"], capsys)
    assert "--keep-best (the run has --no-keep-best)" in err
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml"]


def test_a_run_from_before_min_delta_served_patience_only_still_resumes(tmp_path, capsys):
    """--keep-best --min-delta without --patience was a run's choice before --min-delta
    stopped deciding the best: its config.yaml still resumes (from then on any gain is kept)."""
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "4", "--val-every", "2",
                 "--keep-best", "--patience", "3", "--min-delta", "0.1", "--threads", "1"]) == 0
    saved = (out / "config.yaml").read_text()
    assert "patience: 3\n" in saved
    (out / "config.yaml").write_text(saved.replace("patience: 3\n", "patience: null\n"))
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", "--max-steps", "6",
                 "--threads", "1"]) == 0
    assert "error" not in capsys.readouterr().err


def test_every_task_declares_metrics_whose_direction_is_declared():
    for name, task in available_tasks().items():
        assert task.val_metrics[0] == "val_loss", name  # the default --monitor
        assert set(task.val_metrics) <= set(VAL_METRICS), name


def test_the_cli_page_lists_each_tasks_validation_metrics_and_flags_train_takes():
    import re
    from pathlib import Path

    from attnlab.cli import build_parser

    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    section = text.split("### Keep the best, stop early")[1].split("\n#")[0]
    listed = {}
    for names, metrics in re.findall(r"^\| ([a-z, ]+) \| (.+) \|$", section, flags=re.M):
        for name in names.split(", "):
            if name != "task":  # the header
                listed[name] = set(re.findall(r"`(val_\w+)`", metrics))
    assert listed == {name: set(task.val_metrics) for name, task in available_tasks().items()}
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    tasks = train._subparsers._group_actions[0].choices
    for flag in set(re.findall(r"`(--[a-z-]+)", section)):
        assert any(flag in p._option_string_actions for p in tasks.values()), flag
