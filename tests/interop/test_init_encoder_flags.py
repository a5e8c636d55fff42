"""A new user's flags on ``--init`` of a BERT-family checkpoint: a model flag the checkpoint's
blocks cannot follow is refused in one line before the run directory is written, not recorded
in config.yaml and ignored. Every BERT-family block is post-LN, so ``--norm-first`` trained the
checkpoint's post-LN blocks while config.yaml said ``norm_first: true``."""
import pytest

transformers = pytest.importorskip("transformers")

from attnlab.cli import main  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.tasks.test_tag import capitalised, write_conll  # noqa: E402


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return save_bert(tmp_path_factory.mktemp("bert") / "bert")


def _files(tmp_path):
    csv = tmp_path / "r.csv"
    csv.write_text("text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(20)))
    return {"classify": csv, "tag": write_conll(tmp_path / "t.conll", capitalised(20))}


@pytest.mark.parametrize("task", ["classify", "tag"])
def test_norm_first_with_init_of_a_post_ln_checkpoint_is_refused(bert, tmp_path, capsys, task):
    out = tmp_path / "run"
    capsys.readouterr()
    code = main(["train", task, "--init", str(bert), "--data", str(_files(tmp_path)[task]),
                 "--norm-first", "--max-steps", "1", "--threads", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "--norm-first" in err and "norm_first False" in err
    assert not out.exists()


@pytest.mark.parametrize("task", ["classify", "tag"])
def test_a_max_len_that_holds_only_cls_and_sep_is_refused(bert, tmp_path, capsys, task):
    # classify: a ValueError traceback, exit 1; tag: "the training loss became nan", exit 2
    out = tmp_path / "run"
    capsys.readouterr()
    code = main(["train", task, "--init", str(bert), "--data", str(_files(tmp_path)[task]),
                 "--max-len", "2", "--max-steps", "1", "--threads", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "--max-len 2" in err and "2 special tokens" in err and "--max-len 3" in err
    assert not out.exists()
