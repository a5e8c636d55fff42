"""The reverse/copy/sort data, input parsing, padding of short inputs, and test metrics."""
import pytest
import torch

from attnlab.data import SequenceDataset, batch_loader, make_labels, pad_to_length
from attnlab.errors import UsageError
from attnlab.tasks import get_task
from attnlab.tasks.sequence.runtime import parse_tokens, sequence_metrics


def test_labels_reverse_copy_sort():
    x = torch.tensor([[3, 1, 2, 0]])
    assert make_labels("reverse", x).tolist() == [[0, 2, 1, 3]]
    assert make_labels("copy", x).tolist() == [[3, 1, 2, 0]]
    assert make_labels("sort", x).tolist() == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="'rotate'"):
        make_labels("rotate", x)


def test_splits_fixed_by_seed_independent_of_global_rng():
    torch.manual_seed(0)
    a = SequenceDataset("reverse", 10, 16, 200, seed=7, split="test")
    torch.manual_seed(123)  # the global state must not matter
    b = SequenceDataset("reverse", 10, 16, 200, seed=7, split="test")
    assert torch.equal(a.inputs, b.inputs)
    val = SequenceDataset("reverse", 10, 16, 200, seed=7, split="val")
    other = SequenceDataset("reverse", 10, 16, 200, seed=8, split="test")
    assert not torch.equal(a.inputs, val.inputs) and not torch.equal(a.inputs, other.inputs)
    assert int(a.inputs.min()) >= 0 and int(a.inputs.max()) <= 9
    x, y = a[3]
    assert torch.equal(y, x.flip(0))


def test_batch_loader_covers_every_example_once_per_epoch():
    ds = SequenceDataset("copy", 5, 4, 50, seed=0)
    batches = list(batch_loader(ds, 16, shuffle=True, seed=0))
    assert [len(x) for x, _ in batches] == [16, 16, 16, 2]
    seen = torch.cat([x for x, _ in batches])
    assert sorted(map(tuple, seen.tolist())) == sorted(map(tuple, ds.inputs.tolist()))
    again = list(batch_loader(ds, 16, shuffle=True, seed=0))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))  # same seed, same order


def test_batch_loader_resumes_mid_epoch_and_reshuffles_each_epoch():
    ds = SequenceDataset("copy", 5, 4, 100, seed=0)
    first = batch_loader(ds, 10, shuffle=True, seed=1)
    epoch0 = [x for x, _ in first]
    it = iter(first)
    seen = [next(it)[0] for _ in range(3)]  # 3 batches into epoch 1, then "killed"
    state = first.state_dict()
    assert state == {"epoch": 1, "done": 3, "world": 1}
    resumed = batch_loader(ds, 10, shuffle=True, seed=1)
    resumed.load_state_dict(state)
    rest = [x for x, _ in resumed]
    assert len(rest) == 7 and len(resumed) == 10
    epoch1 = seen + rest
    assert sorted(map(tuple, torch.cat(epoch1).tolist())) == sorted(map(tuple, ds.inputs.tolist()))
    assert not all(torch.equal(a, b) for a, b in zip(epoch0, epoch1))  # a new order
    uninterrupted = batch_loader(ds, 10, shuffle=True, seed=1)
    list(uninterrupted)
    assert all(torch.equal(a, b) for a, b in zip([x for x, _ in uninterrupted], epoch1))


@pytest.mark.parametrize("task", ["reverse", "copy", "sort"])
def test_padding_puts_the_answer_in_the_first_positions(task):
    tokens = [3, 9, 1, 4]
    padded, start = pad_to_length(task, tokens, 8, 10)
    assert len(padded) == 8 and padded[start:start + 4] == tokens
    full = make_labels(task, torch.tensor([padded]))[0, :4]
    assert full.tolist() == make_labels(task, torch.tensor([tokens]))[0].tolist()


def test_parse_tokens_errors_name_the_token():
    assert parse_tokens(" 3 1  4 ", 10, 16) == [3, 1, 4]
    with pytest.raises(UsageError, match="'12'"):
        parse_tokens("3 12", 10, 16)
    with pytest.raises(UsageError, match="'-1'"):
        parse_tokens("-1", 10, 16)
    with pytest.raises(UsageError, match="at most --seq-len 3.*'4'"):
        parse_tokens("1 2 3 4", 10, 3)
    with pytest.raises(UsageError, match="empty"):
        parse_tokens("  ", 10, 3)
    with pytest.raises(UsageError, match="is not a symbol"):  # past int()'s 4,300 digits
        parse_tokens("9" * 5000, 10, 3)


def test_two_sequences_on_two_lines_are_refused_not_joined():
    # predict --input "$(cat inputs.txt)" printed one reversal of the lines end to end
    with pytest.raises(UsageError, match=r"^--input holds 2 lines; it is one sequence, on one "
                                         r"line \(predict --input-file FILE"):
        parse_tokens("3 1 4\n2 7", 10, 16)
    assert parse_tokens("3 1 4\n", 10, 16) == [3, 1, 4]  # a pasted line's end cuts nothing


class _Oracle:
    """Predicts the reversal exactly, except for row 0 position 0."""

    def predict(self, x):
        y = x.flip(-1).clone()
        y[0, 0] = (y[0, 0] + 1) % 10
        return y


def test_sequence_metrics_counts_only_real_tokens():
    x = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    m = sequence_metrics(_Oracle(), x, x.flip(-1))
    assert m == {"test_token_accuracy": 7 / 8, "test_sequence_accuracy": 0.5}
    lengths = torch.tensor([4, 2])
    labels = x.flip(-1).clone()
    labels[1, 2:] = 0  # beyond the length: must not count
    m = sequence_metrics(_Oracle(), x, labels, lengths)
    assert m["test_token_accuracy"] == pytest.approx(5 / 6) and m["test_sequence_accuracy"] == 0.5


def test_validate_rejects_bad_task_flags():
    task = get_task("reverse")
    cfg = {**task.defaults, "num_categories": 1}
    with pytest.raises(UsageError, match="--num-categories"):
        task.check_settings(cfg)


def test_config_file_and_epochs_set_the_budget(tmp_path):
    from attnlab.commands.train import build_config

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("seq-len: 8\ntrain_size: 1000\nbatch_size: 100\nepochs: 3\n")
    cfg = build_config("sort", {"config": str(cfg_file), "batch_size": 300})  # the flag wins
    assert cfg["seq_len"] == 8 and cfg["batch_size"] == 300
    assert get_task("sort").budget(cfg) == 3 * 4  # 3 epochs × ceil(1000 / 300) batches
    cfg = build_config("reverse", {})
    assert get_task("reverse").budget(cfg) == cfg["max_steps"] == 600
