"""One declaration per rule, continued (``test_rules.py``): the fractions held out of a data
file, the sampling temperature's floor, the beam's range, what a run lacking a shared setting
trained with, and a corpus's validation share are each declared once, and every place that
checks them refuses the same values in the same words."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from attnlab.cli import main
from attnlab.commands.prepare import PrepareOptions
from attnlab.commands.train import build_config
from attnlab.commands.translate import TranslateOptions
from attnlab.errors import UsageError
from attnlab.generation import select_next_token
from attnlab.loading import check_run_dir
from attnlab.runs import read_yaml, write_yaml
from attnlab.settings import (CorpusSettings, TrainSettings, absent_values,
                              fractions_leave_training)
from attnlab.tasks.jets.data import write_jets
from attnlab.tasks.translate.spec import TranslateSettings

from .jets.test_task import synthetic_jets
from .reliability.conftest import write_corpus, write_reviews
from .test_run_config import FIXTURES

TOO_MUCH = "attnlab: error: " + fractions_leave_training(0.5, 0.5)


# --- the fractions held out: classify and jets, at train time and load time ------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """For each task that holds out fractions of --data: its --data, --val and --test files."""
    tmp = tmp_path_factory.mktemp("fractions")
    files = {"classify": [write_reviews(tmp / f"{name}.csv", rows=40)
                          for name in ("data", "val", "test")]}
    files["jets"] = []
    for seed, name in enumerate(("data", "val", "test")):
        write_jets(tmp / f"{name}.h5", *synthetic_jets(20, seed=seed, most=8))
        files["jets"].append(tmp / f"{name}.h5")
    return {task: [str(p) for p in paths] for task, paths in files.items()}


@pytest.mark.parametrize("task", ["classify", "jets"])
def test_both_tasks_refuse_fractions_that_leave_nothing_to_train_on_in_one_message(
        task, data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", task, "--data", data[task][0], "--val-fraction", "0.5",
                 "--test-fraction", "0.5", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == TOO_MUCH
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "jets"])
def test_a_fraction_whose_own_file_is_given_is_not_held_out_and_does_not_count(task, data):
    """--val FILE: --val-fraction holds nothing out, so 0.9 + 0.5 leaves half of --data to
    train on; with both files neither fraction counts. Both tasks agree (classify once refused
    these, though it held nothing out)."""
    main_file, val, test = data[task]
    with_val = build_config(task, {"data": main_file, "val": val, "val_fraction": 0.9,
                                   "test_fraction": 0.5})
    assert (with_val.val_fraction, with_val.test_fraction) == (0.9, 0.5)
    with_both = build_config(task, {"data": main_file, "val": val, "test": test,
                                    "val_fraction": 0.6, "test_fraction": 0.6})
    assert (with_both.val_fraction, with_both.test_fraction) == (0.6, 0.6)


def test_the_rule_counts_only_the_fractions_held_out():
    assert fractions_leave_training(0.6, 0.6, val_used=False, test_used=False) is None
    assert fractions_leave_training(0.9, 0.5, val_used=False) is None
    assert fractions_leave_training(0.3, 0.7) == (
        "--val-fraction (0.3) + --test-fraction (0.7) must be < 1: nothing would be left to "
        "train on")
    assert fractions_leave_training(0.2, 1.0, val_used=False) == (
        "--test-fraction (1.0) must be < 1: nothing would be left to train on")


@pytest.mark.parametrize("case", ["classify", "jets"])
def test_a_hand_edited_config_yaml_whose_fractions_leave_nothing_is_refused_naming_it(
        case, tmp_path):
    values = {**read_yaml(FIXTURES / f"{case}.yaml"), "val_fraction": 0.5, "test_fraction": 0.5}
    write_yaml(tmp_path / "config.yaml", values)
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UsageError) as refused:
        check_run_dir(tmp_path)
    assert str(refused.value) == f"{tmp_path / 'config.yaml'}: " + fractions_leave_training(
        0.5, 0.5, names=("val_fraction", "test_fraction"))
    # a run that held nothing out (its own --val and --test files) loads
    write_yaml(tmp_path / "config.yaml", {**values, "val": "v", "test": "t"})
    assert check_run_dir(tmp_path)[1].val_fraction == 0.5


# --- the temperature's floor: the library and `generate` ---------------------------------------

@pytest.mark.parametrize("temperature", [1e-9, 1e-30, 9.9e-7, 0.0])  # 0: the usual ask
def test_a_temperature_too_small_to_sample_with_is_refused_by_the_library_and_generate(
        temperature, tmp_path, capsys):
    with pytest.raises(ValueError) as refused:
        select_next_token(torch.zeros(2, 5), do_sample=True, temperature=temperature)
    said = str(refused.value)
    assert said.startswith(f"temperature {temperature} is too small (at least 1e-06)")
    assert main(["generate", str(tmp_path / "run"), "--prompt", "a",
                 "--temperature", str(temperature)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"attnlab: error: --{said}" and "--greedy" in err


def test_the_smallest_temperature_allowed_samples():
    torch.manual_seed(0)
    ids = select_next_token(torch.tensor([[0.0, 1.0, 0.5]]), do_sample=True, temperature=1e-6)
    assert ids.tolist() == [1]  # almost greedy, and no NaN probabilities


# --- --beam and --length-penalty: train translate and translate --------------------------------

def test_beam_and_length_penalty_have_one_range_in_both_commands():
    ranges = ("low", "above", "below", "most", "floor", "cap", "choices")
    for name in ("beam", "length_penalty"):
        trained, given = (next(f for f in dataclasses.fields(cls) if f.name == name).metadata
                          for cls in (TranslateSettings, TranslateOptions))
        assert {k: trained[k] for k in ranges} == {k: given[k] for k in ranges}, name


# (flags, the one line both commands answer): --length-penalty with beams, as it is for beams
BEAM_CASES = [
    (["--beam", "100000"], "--beam 100000 is too large (at most 100): more beams only cost "
                           "time (each step scores beams x vocabulary candidates)"),
    (["--beam", "0"], "--beam must be a positive integer, got 0"),
    (["--beam", "2", "--length-penalty", "nan"], "--length-penalty must be a number, got nan"),
]


@pytest.mark.parametrize("flags, message", BEAM_CASES)
def test_train_translate_and_translate_refuse_the_same_beam_settings(flags, message, tmp_path,
                                                                     capsys):
    """Both exit 2 with the same line naming the flag; train writes no run directory."""
    out = tmp_path / "run"
    for argv in (["train", "translate", *flags, "--out", str(out)],
                 ["translate", str(tmp_path / "some-run"), "three", *flags]):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.strip() == f"attnlab: error: {message}", argv
    assert not out.exists()


def test_the_largest_beam_is_taken_by_train_translate():
    assert build_config("translate", {"beam": 100}).beam == 100


# --- what a run lacking a shared setting trained with: read from the declarations -------------

def test_absent_values_are_the_declared_ones():
    declared = {f.name: f.metadata["absent"] for f in dataclasses.fields(TrainSettings)
                if "absent" in f.metadata}
    assert absent_values(TrainSettings) == declared == {
        "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999, "accumulate": 1, "min_lr": None,
        "cooldown": None, "checkpoint_activations": False, "optimizer": "adamw", "muon_lr": None,
        "monitor": "val_loss", "keep_best": False, "patience": None, "min_delta": 0.0}


@pytest.mark.parametrize("flag, value, had", [("--weight-decay", 0.1, 0.0),
                                              ("--beta2", 0.99, 0.999), ("--beta1", 0.8, 0.9)])
def test_resuming_an_lm_run_from_before_a_setting_existed_keeps_what_it_trained_with(
        flag, value, had, tmp_path):
    """lm's defaults (decay 0.1, beta2 0.99), and a beta1 other than PyTorch's 0.9, are not
    what an older run trained with: resuming it with them given is refused, naming the value
    the run had."""
    values = read_yaml(FIXTURES / "lm.yaml")
    del values["weight_decay"], values["beta2"]
    write_yaml(tmp_path / "config.yaml", values)
    key = flag[2:].replace("-", "_")
    with pytest.raises(UsageError, match=rf"--resume: {flag} {value} \(the run has {had}\)"):
        build_config("lm", {"resume": True, "out": str(tmp_path), key: value})


def test_an_older_ddp_run_resumes_on_the_epochs_budget_it_started_with(tmp_path):
    """--epochs now counts the passes of all processes together (half the steps on 2); a
    run made before counted them per process: resumed, it keeps its budget (review: it was
    halved, or refused as below the steps already done)."""
    from attnlab.settings import epoch_steps

    values = {**read_yaml(FIXTURES / "reverse.yaml"), "devices": 2, "epochs": 4}
    values.pop("epochs_of_all_processes", None)  # none before this attnlab
    write_yaml(tmp_path / "config.yaml", values)
    older = build_config("reverse", {"resume": True, "out": str(tmp_path)})
    assert epoch_steps(older, 10, 4) == 40
    write_yaml(tmp_path / "config.yaml", {**values, "epochs_of_all_processes": True})
    assert epoch_steps(build_config("reverse", {"resume": True, "out": str(tmp_path)}),
                       10, 4) == 20
    assert epoch_steps(build_config("reverse", {"devices": 2, "epochs": 4}), 10, 4) == 20


# --- a corpus's validation share: prepare() and `attnlab prepare` -------------------------------

@pytest.mark.parametrize("share", [0.0, 0.7, -0.1])
def test_prepare_and_the_library_refuse_the_same_validation_share(share, tmp_path, capsys):
    from attnlab.data.corpus import prepare

    corpus = write_corpus(tmp_path / "c.txt")
    with pytest.raises(ValueError) as refused:
        prepare([corpus], tmp_path / "lib", val_fraction=share)
    assert str(refused.value) == f"val_fraction must be in (0, 0.5], got {share}"
    assert main(["prepare", str(corpus), "--out", str(tmp_path / "cli"),
                 "--val-fraction", str(share)]) == 2
    assert capsys.readouterr().err.strip() == \
        f"attnlab: error: --{str(refused.value).replace('val_fraction', 'val-fraction')}"
    assert not (tmp_path / "lib").exists() and not (tmp_path / "cli").exists()
    assert issubclass(PrepareOptions, CorpusSettings)


def test_a_run_made_with_a_beam_above_the_cap_still_loads(tmp_path):
    """The cap refuses a new --beam 100000; a run whose config.yaml records beam 200 (trained
    before the cap) loads with it, and a beam out of range is still refused naming the file."""
    from pathlib import Path

    values = read_yaml(Path(__file__).parent / "fixtures" / "configs" / "translate-transformer.yaml")
    write_yaml(tmp_path / "config.yaml", {**values, "beam": 200})
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert check_run_dir(tmp_path)[1].beam == 200
    write_yaml(tmp_path / "config.yaml", {**values, "beam": 0})
    with pytest.raises(UsageError, match=r"config.yaml: beam must be a positive integer, got 0"):
        check_run_dir(tmp_path)


def test_graphs_per_class_split_is_one_rule_in_the_command_and_the_library(tmp_path, capsys):
    """Ten nodes a class hold at most 9 train + validation nodes, for ``train graph`` (sbm,
    30 nodes in 3 groups) and for ``split_nodes`` alike; 5 + 4 fits."""
    from attnlab.data.graphs import split_nodes

    labels = torch.arange(3).repeat_interleave(10)
    with pytest.raises(ValueError, match=r"^train_per_class \+ val_per_class must be at most 9 "
                                         r"\(class 0 has 10 nodes\), got 8 \+ 4$"):
        split_nodes(labels, 8, 4, seed=0)
    assert split_nodes(labels, 5, 4, seed=0)["test"].sum() == 3
    out = tmp_path / "run"
    assert main(["train", "graph", "--graph", "sbm", "--nodes", "30", "--communities", "3",
                 "--train-per-class", "8", "--val-per-class", "4", "--out", str(out)]) == 2
    assert "--train-per-class + --val-per-class must be at most 9 (" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_anomalys_set_size_is_one_rule_in_the_command_and_the_library(tmp_path, capsys):
    from attnlab.data.digits_sets import DigitSets, digit_pools

    pool = digit_pools()["test"]
    with pytest.raises(ValueError, match=r"^set_size must be in \[3, (\d+)\]"):
        DigitSets(pool, 4, set_size=500)
    assert main(["train", "anomaly", "--set-size", "500", "--out", str(tmp_path / "r")]) == 2
    assert "--set-size must be in [3, " in capsys.readouterr().err


@pytest.mark.slow  # trains a run and resumes it
def test_a_run_made_with_a_beam_above_the_cap_still_resumes(tmp_path):
    """The cap is for a new choice: a run whose config.yaml records beam 200 (made before the
    cap) goes on with it under --resume."""
    from tests.reliability.test_load_after_train import CASES, SMALL

    out = tmp_path / "run"
    _, flags, _ = CASES["translate-transformer"]
    assert main(["train", "translate", "--out", str(out), *SMALL, *flags]) == 0
    values = read_yaml(out / "config.yaml")
    write_yaml(out / "config.yaml", {**values, "beam": 200})
    assert main(["train", "translate", "--out", str(out), "--resume", "--max-steps", "4"]) == 0
    assert read_yaml(out / "config.yaml")["beam"] == 200


def test_resuming_an_lm_run_from_before_its_dropout_settings_trains_as_it_did(tmp_path,
                                                                            monkeypatch):
    """An lm run made before --ff-dropout and --attention-dropout had --dropout inside each
    feed-forward network and none on the attention weights: resumed, it goes on so (lm's own
    defaults, 0.0 and as --dropout, are for new runs), as ``attnlab.load`` builds it."""
    from attnlab.tasks.lm.runtime import build_model

    values = read_yaml(FIXTURES / "lm.yaml")
    values.pop("ff_dropout", None)
    del values["attention_dropout"]
    write_yaml(tmp_path / "config.yaml", values)
    from attnlab.tasks import get_task

    # the fixture's corpus is not on this machine: its checks are another test's
    monkeypatch.setattr(type(get_task("lm")), "validate", lambda self, cfg: None)
    cfg = build_config("lm", {"resume": True, "out": str(tmp_path)})
    block = build_model(cfg).decoder.layers[0]
    assert (block.linear_net[1].p, block.self_attn.dropout) == (0.1, 0.0)
