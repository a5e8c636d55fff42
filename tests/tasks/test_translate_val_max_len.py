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


@pytest.mark.slow  # trains a run and resumes it
def test_a_resumed_run_keeps_the_position_table_it_was_built_with(tmp_path, monkeypatch):
    """A run made when max_len was derived otherwise (before validation pairs counted) resumes
    with its recorded max_len: re-derived, a learned position table one row longer than its
    checkpoint's stopped the resume, blaming an edited config.yaml (review)."""
    from attnlab.runs import read_yaml
    from attnlab.tasks.translate import runtime

    rows = [(" ".join(f"w{i}x{j}" for j in range(70)), f"y{i} z{i}") for i in range(40)]
    data, out = tmp_path / "pairs.tsv", tmp_path / "run"
    _write_pairs(data, rows)
    derive = runtime._fit_tokenizers

    def as_before(cfg, *args):  # an older rule: one position fewer (still past every source)
        cfg, tok = derive(cfg, *args)
        return cfg.derive(max_len=cfg.max_len - 1), tok

    with monkeypatch.context() as patch:
        patch.setattr(runtime, "_fit_tokenizers", as_before)
        assert main(["train", "translate", "--data", str(data), "--out", str(out),
                     "--positional", "learned", *TINY]) == 0
    recorded = read_yaml(out / "config.yaml")["max_len"]
    assert main(["train", "translate", "--out", str(out), "--resume", "--max-steps", "4"]) == 0
    assert read_yaml(out / "config.yaml")["max_len"] == recorded
