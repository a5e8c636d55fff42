"""``attnlab prepare`` on a disk that fills while it writes the tokenizer: the error names the
file asked for (``OUT/tokenizer.json``), not the temporary one it was being written as, and
leaves nothing half-written."""
import random

from attnlab.cli import main

from .test_disk_full import files_capped_at


def test_a_tokenizer_that_does_not_fit_is_named_as_the_file_asked_for(tmp_path, capsys):
    rng = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    corpus = tmp_path / "corpus.txt"  # 400 words of 381 kinds: a tokenizer.json of ~4.5 kB
    corpus.write_text(" ".join(rng.choice(words) for _ in range(400)) + "\n")
    out = tmp_path / "prepared"
    with files_capped_at(2048):  # the token files (< 1 kB) fit, the tokenizer does not
        code = main(["prepare", str(corpus), "--out", str(out), "--tokenizer", "word"])
    assert code == 1
    assert capsys.readouterr().err.splitlines()[-1] == \
        f"attnlab: cannot write to {out / 'tokenizer.json'}: File too large"
    assert not out.exists()  # made by this prepare, and removed with what it wrote
