"""A DDP run re-runs the command in each process (Lightning's launcher; torchrun and srun start
them all), and each process ran the task's checks of the data: its notes (held-out rows that
training has too, a split without an entity) were printed once per process. The first says
them; the others check in silence."""
import pytest

from attnlab.cli import build_parser
from attnlab.commands import train

from ..tasks.test_tag import capitalised, write_conll


@pytest.mark.parametrize("rank, said", [(None, True), ("1", False)])
def test_the_notes_of_the_data_are_said_by_the_first_process_alone(tmp_path, monkeypatch,
                                                                    capsys, rank, said):
    for key in train.RANK_KEYS:
        monkeypatch.delenv(key, raising=False)
    if rank:
        monkeypatch.setenv("LOCAL_RANK", rank)
    data = write_conll(tmp_path / "twice.conll", capitalised(30) * 2)
    args = build_parser().parse_args(["train", "tag", "--data", str(data), "--out",
                                      str(tmp_path / "run"), "--max-steps", "1"])
    given = {k: v for k, v in vars(args).items() if k not in ("task", "func", "command")}
    train._configured(args.task, given)
    err = capsys.readouterr().err
    assert ("have an input that a training row has too" in err) is said, err
