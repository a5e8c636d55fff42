"""Every mistake a user can make on the command line exits 2 with one line naming it.

docs/cli.md: exit status 2 on a usage or input error, with a one-line message on stderr that names
the offending flag, file, column or value, and no traceback.
"""
from pathlib import Path

import pytest

from attnlab.cli import main

from .conftest import write_reviews

pytestmark = pytest.mark.slow  # uses trained runs of every task; starts a real process


def _cases(tmp: Path, run: Path, runs: dict[str, Path]):
    broken_yaml = tmp / "broken.yaml"
    broken_yaml.write_text("lr: [0.1\nseed: 3\n")
    list_yaml = tmp / "list.yaml"
    list_yaml.write_text("- 1\n- 2\n")
    unknown_yaml = tmp / "unknown.yaml"
    unknown_yaml.write_text("learning_rate: 0.1\n")
    typed_yaml = tmp / "typed.yaml"
    typed_yaml.write_text("dropout: lots\n")
    twice_yaml = tmp / "twice.yaml"  # PyYAML lets the last one win: refused, naming the key
    twice_yaml.write_text("max_steps: 3\nmax_steps: 4\n")
    twice_spelt = tmp / "twice_spelt.yaml"
    twice_spelt.write_text("max-steps: 3\nmax_steps: 4\n")
    unreadable = tmp / "unreadable.yaml"
    unreadable.write_bytes(b"\xff\xfe\x00bad")
    not_a_run = tmp / "empty_dir"
    not_a_run.mkdir(exist_ok=True)
    occupied = tmp / "occupied"
    occupied.mkdir(exist_ok=True)
    (occupied / "something.txt").write_text("keep me")
    empty_txt = tmp / "empty.txt"
    empty_txt.write_text("")
    reviews = write_reviews(tmp / "reviews.csv")
    no_label = tmp / "no_label.csv"
    no_label.write_text("text,sentiment\ngood film,pos\nbad film,neg\n")
    one_class = tmp / "one_class.csv"
    one_class.write_text("text,label\n" + "".join(f"film {i},pos\n" for i in range(20)))
    weights = tmp / "weights.json"  # reviews' classes are neg and pos
    weights.write_text('{"pos": 1, "meh": 2}')
    words = tmp / "words.csv"
    words.write_text("text,label\ngood film,4.5\nbad film,lots\n")
    parquet, not_datasets, splits, lists, corrupt = _columnar(tmp)
    c5 = ["--out", str(tmp / "c5")]  # a refused run leaves no directory behind
    fields = tmp / "fields.conll"
    fields.write_text("John NNP B-PER\nlives VBZ\n")
    not_bio = tmp / "not_bio.conll"
    not_bio.write_text("John NNP B-PER\nSmith NNP PER\n")
    lengths = tmp / "lengths.jsonl"
    lengths.write_text('{"tokens": ["a", "b"], "tags": ["O"]}\n')
    empty_conll = tmp / "empty.conll"
    empty_conll.write_text("\n\n")
    # (argv, a fragment the one-line message must contain)
    return [
        (["train", "nosuchtask"], "nosuchtask"),
        (["train", "reverse", "--epochs", "-1"], "--epochs"),
        (["train", "reverse", "--epochs", "0"], "--epochs"),
        (["train", "reverse", "--max-steps", "0"], "--max-steps"),
        (["train", "reverse", "--dropout", "1.5"], "--dropout"),
        (["train", "reverse", "--dropout", "-0.1"], "--dropout"),
        (["train", "reverse", "--lr", "abc"], "--lr"),
        (["train", "reverse", "--lr", "0"], "--lr"),
        (["train", "reverse", "--lr", "nan"], "--lr"),
        (["train", "reverse", "--batch-size", "x"], "--batch-size"),
        (["train", "reverse", "--batch-size", "-4"], "--batch-size"),
        (["train", "reverse", "--warmup", "-1"], "--warmup"),
        (["train", "reverse", "--model-dim", "30", "--num-heads", "4"], "--num-heads"),
        (["train", "reverse", "--num-layers", "0"], "--num-layers"),
        (["train", "reverse", "--seq-len", "0"], "--seq-len"),
        (["train", "reverse", "--num-categories", "1"], "--num-categories"),
        (["train", "reverse", "--precision", "8"], "--precision"),
        (["train", "reverse", "--strategy", "magic"], "--strategy"),
        (["train", "reverse", "--no-such-flag"], "--no-such-flag"),
        (["train", "reverse", "--config", str(tmp / "missing.yaml")], "missing.yaml"),
        (["train", "reverse", "--config", str(broken_yaml)], "broken.yaml"),
        (["train", "reverse", "--config", str(list_yaml)], "list.yaml"),
        (["train", "reverse", "--config", str(unknown_yaml)], "learning_rate"),
        (["train", "reverse", "--config", str(typed_yaml)], "typed.yaml: dropout"),
        (["train", "reverse", "--config", str(unreadable)], "unreadable.yaml"),
        (["train", "reverse", "--config", str(twice_yaml)], "'max_steps' is set twice"),
        (["train", "reverse", "--config", str(twice_spelt)], "max_steps is set twice (as max-steps"),
        (["train", "reverse", "--resume"], "--resume"),
        (["train", "reverse", "--resume", "--out", str(not_a_run)], "--resume"),
        (["train", "reverse", "--out", str(occupied)], "occupied"),
        (["evaluate", str(tmp / "nowhere")], "nowhere"),
        (["evaluate", str(not_a_run)], "empty_dir"),
        (["evaluate", str(run), "--data", str(tmp / "missing.txt")], "missing.txt"),
        (["predict", str(run), "--input", "1 2 99"], "99"),
        (["predict", str(run), "--input", "1 x 2"], "'x'"),
        (["predict", str(run), "--input", "   "], "--input"),
        (["predict", str(run), "--input", " ".join(["1"] * 17)], "--seq-len"),
        (["predict", str(not_a_run), "--input", "1 2"], "empty_dir"),
        (["predict", str(run)], "--input"),
        (["plot", "attention", str(run), "--input", "5 12"], "12"),
        (["plot", "attention", str(tmp / "nowhere"), "--input", "1"], "nowhere"),
        (["plot", "pe", "--d-model", "0"], "--d-model"),
        (["plot", "lr", "--schedule", "step"], "--schedule"),
        (["plot", "lr", "--warmup", "-5"], "--warmup"),
        (["plot", "lr", "--schedule", "wsd", "--cooldown", "1.5"], "--cooldown"),
        (["explain", "--q", "[[1, 2"], "--q"),
        (["explain", "--q", "[[1,0,0]]", "--k", "[[1,0]]", "--v", "[[1]]"], "--k"),
        (["train", "reverse", "--num-nodes", "2"], "--num-nodes"),
        (["train", "reverse", "--strategy", "fsdp", "--accelerator", "cpu", "--out",
          str(tmp / "f1")], "--strategy fsdp"),
        (["nosuchcommand"], "nosuchcommand"),
        # translate: a run of another kind, empty text
        (["translate", str(run), "three"], "'reverse'"),
        (["translate", str(runs["translate"]), "  "], "TEXT"),
        (["translate", str(runs["translate"]), "three", "--beam", "0"], "--beam"),
        # generate: a run of another kind, bad sampling settings, empty prompt
        (["generate", str(run), "--prompt", "the"], "'reverse'"),
        (["generate", str(runs["classify"]), "--prompt", "the"], "'classify'"),
        (["generate", str(runs["lm"]), "--prompt", "the", "--max-new-tokens", "-1"],
         "--max-new-tokens"),
        (["generate", str(runs["lm"]), "--prompt", "the", "--temperature", "-1"], "--temperature"),
        (["generate", str(runs["lm"]), "--prompt", "the", "--top-p", "1.5"], "--top-p"),
        (["generate", str(runs["lm"]), "--prompt", ""], "--prompt"),
        (["generate", str(runs["lm"])], "--prompt"),
        # prepare: missing, empty, bad vocabulary
        (["prepare", str(tmp / "missing.txt"), "--out", str(tmp / "p1")], "missing.txt"),
        (["prepare", str(empty_txt), "--out", str(tmp / "p2")], "empty.txt"),
        (["prepare", str(reviews), "--out", str(tmp / "p3"), "--vocab-size", "0"], "--vocab-size"),
        # train of each other task: its data and its own flags
        (["train", "classify", "--out", str(tmp / "c1")], "--data"),
        (["train", "classify", "--data", str(tmp / "missing.csv")], "missing.csv"),
        (["train", "classify", "--data", str(no_label)], "'label'"),
        (["train", "classify", "--data", str(reviews), "--label-column", "stars"], "'stars'"),
        (["train", "classify", "--data", str(one_class)], "single class"),
        (["train", "classify", "--data", str(reviews), "--class-weights", str(weights),
          "--out", str(tmp / "c2")],
         "no weight for class 'neg'; names class 'meh'"),
        (["train", "classify", "--data", str(words), "--regression", "--out", str(tmp / "c3")],
         "words.csv line 3"),
        (["train", "classify", "--data", str(reviews), "--regression", "--multi-label"],
         "--multi-label and --regression"),
        (["train", "classify", "--data", str(reviews), "--multi-label", "--threshold", "1"],
         "--threshold"),
        # Parquet files and datasets directories
        (["train", "classify", "--data", str(parquet), *c5],
         "no column 'text' (columns: review, label)"),
        (["train", "classify", "--data", str(not_datasets), *c5],
         "not a Hugging Face datasets directory"),
        (["train", "classify", "--data", str(splits / "validation"), *c5],
         "no split 'validation' (splits: train)"),
        (["train", "classify", "--data", str(lists), *c5], "column 'text' holds list<"),
        (["train", "classify", "--data", str(corrupt), *c5], "not a readable Parquet file"),
        (["train", "translate", "--data", str(parquet), *c5], "no columns 'source', 'target'"),
        (["evaluate", str(runs["classify"]), "--data", str(corrupt)],
         "not a readable Parquet file"),
        (["prepare", str(parquet), "--out", str(tmp / "p4")], "name it with --text-column"),
        (["train", "lm", "--data", str(parquet), "--out", str(tmp / "l1")],
         "prepare this table first"),
        # a datasets directory is a table too (it was advised to prepare its .arrow files)
        (["train", "lm", "--data", str(splits), "--out", str(tmp / "l1")],
         "prepare this table first"),
        (["train", "tag", "--out", str(tmp / "t1")], "--data"),
        (["train", "tag", "--data", str(fields), "--out", str(tmp / "t2")], "fields.conll line 2"),
        (["train", "tag", "--data", str(not_bio)], "not_bio.conll line 2: tag 'PER'"),
        (["train", "tag", "--data", str(lengths)], "lengths.jsonl line 1: 2 tokens but 1 tags"),
        (["train", "tag", "--data", str(empty_conll)], "empty.conll: no sentence"),
        (["predict", str(runs["tag"]), "--input", "  "], "--input"),
        (["train", "lm", "--out", str(tmp / "l1")], "--data"),
        (["train", "lm", "--data", str(tmp / "missing.txt")], "missing.txt"),
        (["train", "lm", "--data", str(empty_txt), "--out", str(tmp / "l2")], "empty.txt"),
        (["train", "translate", "--src", "xx"], "--src"),
        (["train", "translate", "--tgt", "klingon"], "--tgt"),
        (["train", "anomaly", "--set-size", "1"], "--set-size"),
        (["train", "anomaly", "--set-size", "1000"], "--set-size"),
        # evaluate --data of a missing file, on each kind of run
        *[(["evaluate", str(r), "--data", str(tmp / "missing.csv")],
           "--data" if task == "anomaly" else "missing.csv") for task, r in runs.items()],
        # --monitor, --keep-best, --patience, --min-delta (tests/cli/test_monitor_flags.py)
        (["train", "reverse", "--monitor", "val_bleu", "--patience", "2"], "val_seq_acc"),
        (["train", "reverse", "--patience", "0"], "--patience"),
        (["train", "reverse", "--patience", "2", "--min-delta", "-1"], "--min-delta"),
        (["train", "translate", "--keep-best", "--monitor", "val_bleu"], "--val-bleu N"),
        (["train", "reverse", "--out", str(run), "--resume", "--keep-best", "--monitor",
          "val_acc"], "--monitor val_acc (the run has val_loss)"),
        # resume a run of another task
        (["train", "lm", "--resume", "--out", str(run), "--data", str(empty_txt)], "'reverse'"),
    ]


def _columnar(tmp: Path):
    """A Parquet file without a text column, a directory that is no datasets directory, a
    DatasetDict with a train split only, a list column, a corrupt Parquet file."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp / "reviews.parquet"
    pq.write_table(pa.table({"review": ["good film", "bad film"], "label": ["pos", "neg"]}),
                   parquet)
    lists = tmp / "lists.parquet"
    pq.write_table(pa.table({"text": [["good"], ["bad"]], "label": ["pos", "neg"]}), lists)
    corrupt = tmp / "corrupt.parquet"
    corrupt.write_bytes(parquet.read_bytes()[:-40])
    not_datasets = tmp / "plain_dir"
    not_datasets.mkdir(exist_ok=True)
    (not_datasets / "reviews.csv").write_text("text,label\ngood,pos\n")
    splits = tmp / "dataset_dict"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["x"], "label": ["pos"]})}
                         ).save_to_disk(str(splits))
    return parquet, not_datasets, splits, lists, corrupt


def test_every_bad_input_exits_2_with_one_line(tmp_path, reverse_run, task_runs, capsys):
    failures = []
    for argv, fragment in _cases(tmp_path, reverse_run, task_runs):
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's --help/--version paths only
            code = e.code
        err = capsys.readouterr().err.strip()
        lines = err.splitlines()
        if code != 2 or len(lines) != 1 or fragment not in err or "Traceback" in err:
            failures.append(f"{argv}: exit {code}, stderr {err!r} (expected mention of {fragment!r})")
    assert not failures, "\n".join(failures)
    # nothing was lost: the occupied directory still holds the user's file
    assert (tmp_path / "occupied" / "something.txt").read_text() == "keep me"
    # a refused run leaves no directory behind (it would block the corrected command)
    refused = ("c1", "c2", "c3", "c5", "l1", "l2", "f1", "p4", "t1", "t2")
    assert not [p.name for p in tmp_path.iterdir() if p.name in refused]


def test_real_process_exit_status_and_no_traceback(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "attnlab", "train", "reverse", "--model-dim", "30",
                           "--num-heads", "4", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "attnlab: error: --model-dim (30) must be divisible by --num-heads (4)"
    ]
    assert not (tmp_path / "r").exists(), "a refused run must not create its directory"
