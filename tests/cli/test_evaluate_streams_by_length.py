"""`evaluate DIR --by-length --data FILE` of a translate run reads, translates and scores the
file a chunk of pairs at a time, as `evaluate --data` does (it held every pair and its
translation): its per-length rows are those of all the pairs at once, sacrebleu's chrF of
each bucket, and its totals those of `evaluate --data`. The chunk is made small here (8
pairs) so that a file of 61 pairs has eight."""
from __future__ import annotations

import json

import pytest
import sacrebleu

import attnlab.tasks.translate.runtime as translate_runtime
import attnlab.tasks.translate.scoring as scoring
from attnlab.cli import main
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task

from .test_evaluate_streams_translate import PAIRS, _pairs_file


def test_lengths_tallied_in_chunks_are_the_rows_of_all_pairs_at_once():
    from .test_evaluate_streams import _chunks
    from .test_evaluate_streams_translate import _texts

    hyps, refs = _texts()
    lengths = [len(r.split()) for r in refs]
    tally = scoring.LengthTally(scoring.length_buckets(lengths))
    for part in _chunks(len(refs)):
        tally.add(lengths[part], hyps[part], refs[part])
    rows = tally.rows()
    assert rows == _by_hand(lengths, hyps, refs)
    assert len(rows) > 1 and sum(r["pairs"] for r in rows) == len(refs)


def _by_hand(lengths, hyps, refs):
    """The rows of the pairs grouped by ``lengths``, each bucket's chrF sacrebleu's
    ``corpus_chrf`` of its pairs at once (within 1e-12, then that number)."""
    rows = []
    hyps, refs = scoring.same_form(hyps), scoring.same_form(refs)
    for first, last in scoring.length_buckets(lengths):
        chosen = [i for i, n in enumerate(lengths) if first <= n <= last]
        if chosen:
            outs, truth = [hyps[i] for i in chosen], [refs[i] for i in chosen]
            rows.append({"lengths": f"{first}-{last}" if last > first else str(first),
                         "first": first, "last": last, "pairs": len(chosen),
                         "exact_match": sum(h.strip() == r.strip()
                                            for h, r in zip(outs, truth)) / len(chosen),
                         "chrf": pytest.approx(sacrebleu.corpus_chrf(outs, [truth]).score,
                                               abs=1e-12, rel=0)})
    return rows


@pytest.mark.slow  # reads the session's translate run (tests/cli/conftest.py)
def test_by_length_of_a_file_scores_a_chunk_at_a_time_as_the_whole_file(runs, tmp_path,
                                                                       monkeypatch, capsys):
    run = runs["translate"][0]
    data, rows = _pairs_file(tmp_path / "pairs.tsv")
    run_dir, cfg = check_run_dir(str(run), command="evaluate")
    model, tok = translate_runtime.load(get_task("translate"), run_dir, cfg)
    whole, hyps = scoring.compute_test_metrics(model, tok, rows, cfg)  # every pair at once
    lengths = [len(ids) for ids in tok.encode_sources([s for s, _ in rows])]
    expected = _by_hand(lengths, hyps, [t for _, t in rows])
    assert len(expected) > 1  # more than one bucket: the pairs are sorted into them
    sizes = []
    real = scoring.translate_texts
    monkeypatch.setattr(scoring, "translate_texts",
                        lambda model, tok, texts, **kw: sizes.append(len(texts)) or real(
                            model, tok, texts, **kw))
    monkeypatch.setattr(translate_runtime, "CHUNK_ROWS", 8)
    figure = tmp_path / "by_length.png"
    capsys.readouterr()
    assert main(["evaluate", str(run), "--by-length", "--data", str(data), "--out", str(figure),
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert sizes and max(sizes) <= 8 and sum(sizes) == PAIRS  # never the whole file
    for key in ("test_bleu", "test_chrf", "test_exact_match"):  # printed to 6 digits
        assert scores[key] == float(f"{whole[key]:.6g}"), key
    printed = scores["by_length"]
    assert [{k: v for k, v in r.items() if k != "chrf"} for r in printed] == \
        [{k: (float(f"{v:.6g}") if isinstance(v, float) else v) for k, v in r.items()
          if k != "chrf"} for r in expected]
    assert [r["chrf"] for r in printed] == [float(f"{r['chrf'].expected:.6g}") for r in expected]
    assert f"evaluate: {PAIRS} of {PAIRS} pairs" in err and figure.stat().st_size > 0
