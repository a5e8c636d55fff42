"""A reversal run loaded in Python (``attnlab.load``) answers at the length it was trained on
only: a reversal sends position i to T-1-i for its own T, so a sequence of another length got
answers that were wrong in every place, without a word. ``predict``, ``get_attention_maps`` and
the course's ``model(x)`` refuse it, naming the length trained on and how ``attnlab predict`` pads a shorter one."""
import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.data import pad_to_length
from attnlab.models import ElementPredictor

SEQ_LEN = 16  # TINY_REVERSE keeps the default --seq-len


@pytest.mark.slow
@pytest.mark.parametrize("length", [SEQ_LEN - 5, SEQ_LEN + 4])
@pytest.mark.parametrize("method", ["predict", "get_attention_maps", "__call__"])
def test_another_length_is_refused_naming_the_trained_one(reverse_run, length, method):
    model = attnlab.load(reverse_run)
    with pytest.raises(ValueError, match=rf"x has sequences of {length} symbols; this reverse "
                                         rf"run was trained on --seq-len {SEQ_LEN}") as e:
        getattr(model, method)(torch.randint(10, (2, length)))
    assert "\n" not in str(e.value)
    assert ("pad_to_length('reverse', tokens, 16, 10)" in str(e.value)) == (length < SEQ_LEN)


@pytest.mark.slow
def test_the_padding_the_refusal_names_gives_the_answer_predict_gives(reverse_run, capsys):
    """The hint is code that runs: padded as it says, the first len(tokens) predictions are
    what ``attnlab predict`` prints for the same tokens (the same model, the same padding)."""
    model, tokens = attnlab.load(reverse_run), [3, 1, 4, 1, 5]
    padded, _ = pad_to_length("reverse", tokens, SEQ_LEN, 10)
    answer = model.predict(torch.tensor([padded]))[0, :len(tokens)].tolist()
    assert model.predict(torch.randint(10, (3, SEQ_LEN))).shape == (3, SEQ_LEN)  # its own length
    capsys.readouterr()
    assert main(["predict", str(reverse_run), "--input", "3 1 4 1 5"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == " ".join(map(str, answer))


def test_a_model_built_in_python_takes_any_length():
    """The course's model knows no trained length: a learner may try it on any."""
    model = ElementPredictor(10, 16, 10, num_heads=1, num_layers=1)
    for length in (3, 40):
        assert model.predict(torch.randint(10, (2, length))).shape == (2, length)
