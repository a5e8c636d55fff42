"""Instruction rows are JSON Lines read by the same line reader as every table: JSON that is
no text is refused naming the line (it was a RecursionError traceback, or a lone surrogate
that failed later)."""
import re

import pytest

from attnlab.data.chat_rows import holdout, read_rows
from attnlab.errors import UsageError

GOOD = '{"prompt": "hi", "response": "hello"}\n'


@pytest.mark.parametrize("line, message", [
    ('{"prompt": ' + "[" * 100000 + "]" * 100000 + ', "response": "x"}',
     r"chat.jsonl line 2: JSON that cannot be read \(nested too deeply\)"),
    ('{"prompt": "a \\udc00", "response": "x"}', r"chat.jsonl line 2: a lone surrogate escape"),
])
def test_json_that_is_no_text_is_refused_naming_the_line(tmp_path, line, message):
    path = tmp_path / "chat.jsonl"
    path.write_text(GOOD + line + "\n")
    with pytest.raises(UsageError, match=message):
        read_rows(path)


def test_the_fewest_rows_the_refusal_asks_for_are_enough():
    """5 rows were refused with "give at least 5 rows" (round(0.5) is 0): every count of
    rows is either split, one row or more held out, or refused asking for more than it."""
    for n in range(1, 40):
        try:
            train, val = holdout(n, 0, where="--data chat.jsonl")
        except UsageError as e:
            asked = int(re.search(r"give at least (\d+) rows", str(e)).group(1))
            assert asked > n, str(e)
            continue
        assert val and train and sorted(train + val) == list(range(n))
