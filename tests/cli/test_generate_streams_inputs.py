"""``attnlab generate RUN --input-file FILE`` encoded every prompt of the file and held all
their ids before the first was continued (peak memory 253 MB at 10^4 short prompts, 283 MB at
10^5). Now every prompt is encoded and checked first, keeping none (a bad line anywhere is
still refused before anything is generated), and each is encoded again just before it is
continued: what is held grows with one prompt, not the file. The answers are those of the
lines run in small pieces (greedy), in the file's order; and, as before, ``| head -1`` stops
the command without a traceback."""
import pytest

import attnlab.commands.generate as generate_command
from attnlab.cli import main

from .test_generate_seed_per_input import lm_run  # noqa: F401
from .test_predict_chunks import ClosedPipe

PROMPTS = ["the", "a fox", "lazy", "the quick", "dog", "all you", "need", "jumps over"]
GREEDY = ["--max-new-tokens", "6", "--greedy"]

pytestmark = pytest.mark.slow  # trains a run


def _generate(capsys, run, path) -> list[str]:
    capsys.readouterr()
    assert main(["generate", str(run), "--input-file", str(path), *GREEDY]) == 0
    return capsys.readouterr().out.splitlines()


def test_each_prompt_is_encoded_again_just_before_it_is_continued(lm_run, tmp_path,  # noqa: F811
                                                                 capsys, monkeypatch):
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    from attnlab.tasks.lm import runtime

    encoded, seen = [], []
    real_encode, real_continuation = runtime.encode_prompt, generate_command.continuation

    def encode(*args, **kwargs):
        encoded.append(1)
        return real_encode(*args, **kwargs)

    def continuation(*args, **kwargs):  # how many encodings were made when it starts
        seen.append(len(encoded))
        return real_continuation(*args, **kwargs)

    monkeypatch.setattr(runtime, "encode_prompt", encode)
    monkeypatch.setattr(generate_command, "continuation", continuation)
    together = _generate(capsys, lm_run, path)
    n = len(PROMPTS)
    # all checked first, then prompt k encoded as the k-th continuation starts: held, one
    assert seen == [n + k for k in range(1, n + 1)]
    # the same lines run in pieces of three give the same answers, in the file's order
    pieces = []
    for start in range(0, n, 3):
        piece = tmp_path / f"piece{start}.txt"
        piece.write_text("\n".join(PROMPTS[start:start + 3]) + "\n", encoding="utf-8")
        pieces += _generate(capsys, lm_run, piece)
    assert together == pieces and len(together) == n
    assert [line[:len(p)] for line, p in zip(together, PROMPTS)] == PROMPTS  # in order


def test_head_stops_it_without_a_traceback(lm_run, tmp_path, monkeypatch,  # noqa: F811
                                           capsys):
    """A guard of what generate did before prompts were encoded one at a time (it passed
    then too), kept as the one test of ``generate | head -1``: standard output closed after
    its first line, in this process (a ``bash -c '... | head -1'`` cost seconds of start)."""
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    started, real = [], generate_command.continuation

    def continuation(*args, **kwargs):
        started.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(generate_command, "continuation", continuation)
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert main(["generate", str(lm_run), "--input-file", str(path), *GREEDY]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert len(started) == 1 < len(PROMPTS)  # its first line found the pipe closed: no more
