"""A translator's own parallel file at its edges: ``attnlab train translate --data FILE``."""
import json

import pytest

from attnlab.cli import main
from attnlab.tasks import get_task
from attnlab.tasks.translate.data import file_splits

TINY = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "32",
        "--max-steps", "2", "--warmup", "1", "--threads", "1",
        "--src-tokenizer", "word", "--tgt-tokenizer", "word"]
LONG = " ".join(f"long{j}" for j in range(300))  # far beyond the 64 positions a run starts at


def _write_pairs(path, rows):
    path.write_text("source\ttarget\n" + "".join(f"{s}\t{t}\n" for s, t in rows),
                    encoding="utf-8")


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("side", ["source", "target"])
def test_a_long_validation_pair_does_not_stop_the_run(tmp_path, side):
    rows = [(f"w{i} x{i}", f"y{i} z{i}") for i in range(40)]
    rows[5] = (LONG, "short five") if side == "source" else ("short five", LONG)
    data = tmp_path / "pairs.tsv"
    _write_pairs(data, rows)
    cfg = get_task("translate").config(data=str(data), seed=1)
    assert rows[5] in file_splits(cfg)[1]  # the long pair is held out for validation
    out = tmp_path / "run"
    assert main(["train", "translate", "--data", str(data), "--seed", "1", "--out", str(out),
                 *TINY]) == 0
    assert "test_bleu" in json.loads((out / "metrics.json").read_text())
