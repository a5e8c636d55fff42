"""``attnlab train classify --init DIR`` of a BERT checkpoint with ``--multi-label`` and
``--regression`` (#41): attnlab's head on the checkpoint's encoder, one output per class or one
number; ``export --hf`` writes the family's class with the matching ``problem_type``, whose
logits are the run's (a regression's in the data's units). Tiny random checkpoints, built
locally; fp32, atol = rtol = 1e-5."""
import json

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.tasks.classify.runtime import Padding  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
TEXTS = ["the cat sat on the mat.", "a dog ran fast!", "hello world, hello there",
         "we're here; isn't it fine?", "Transformers attend to every token."]
PROBES = ["the cat ran", "hello there, world!", "a"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    root = tmp_path_factory.mktemp("init_objectives")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    rows = [(f"{TEXTS[i % 5]} {i}", ["x", "y", "x|y"][i % 3], 100 + 10 * (i % 5))
            for i in range(45)]
    (root / "multi.csv").write_text("text,label\n" + "".join(f'"{t}",{lab}\n'
                                                             for t, lab, _ in rows))
    (root / "numbers.csv").write_text("text,label\n" + "".join(f'"{t}",{y}\n'
                                                               for t, _, y in rows))
    return {"dir": save_bert(root / "bert"), "root": root}


def _train(bert, out, flag, data):
    assert main(["train", "classify", "--init", str(bert["dir"]), flag, "--data",
                 str(bert["root"] / data), "--out", str(out), "--max-steps", "4",
                 "--batch-size", "8", "--warmup", "0", "--lr", "1e-2"]) == 0
    return out


def _hf_logits(run, tmp_path):
    """The logits of the exported model and the run's own model on ``PROBES``."""
    out = tmp_path / "hf"
    assert main(["export", str(run), "--hf", str(out)]) == 0
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    model, tok = attnlab.load(run)
    batch = Padding(tok.pad_id, tok.padding_side, tok.token_type_ids).pad(
        tok.encode_for_model(PROBES, 64))
    names = ("input_ids", "attention_mask", "token_type_ids")
    with torch.no_grad():
        return hf, hf(**dict(zip(names, batch))).logits, model(*batch)


@pytest.mark.slow
def test_multi_label_from_a_bert_checkpoint_trains_predicts_and_exports(bert, tmp_path, capsys):
    run = _train(bert, tmp_path / "run", "--multi-label", "multi.csv")
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"test_micro_f1", "test_macro_f1", "val_f1"} <= set(metrics)
    capsys.readouterr()
    assert main(["predict", str(run), "--input", "the cat", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert set(record["probabilities"]) == {"x", "y"}
    assert record["prediction"] == [c for c, p in record["probabilities"].items() if p > 0.5]
    hf, theirs, ours = _hf_logits(run, tmp_path)
    assert hf.config.problem_type == "multi_label_classification"
    assert_close(theirs, ours, **TOL)


@pytest.mark.slow
def test_regression_from_a_bert_checkpoint_exports_the_number_in_the_datas_units(
        bert, tmp_path, capsys):
    run = _train(bert, tmp_path / "run", "--regression", "numbers.csv")
    assert {"test_mse", "test_r2", "test_spearman"} <= set(
        json.loads((run / "metrics.json").read_text()))
    hf, theirs, standardised = _hf_logits(run, tmp_path)
    assert hf.config.problem_type == "regression" and hf.config.num_labels == 1
    capsys.readouterr()
    for probe, number in zip(PROBES, theirs[:, 0].tolist()):
        assert main(["predict", str(run), "--input", probe]) == 0
        assert float(capsys.readouterr().out.strip()) == pytest.approx(number, rel=1e-5)
    cfg = attnlab.loading.check_run_dir(run)[1]
    assert_close(theirs, standardised * cfg.target_std + cfg.target_mean, **TOL)
