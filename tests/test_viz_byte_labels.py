"""A token that is a byte making no character (an untrained model writes lone UTF-8 lead
bytes) is labelled by its escape, ``<0xD0>`` as Hugging Face writes byte tokens, in the
attention figures and pages: they showed a column of "�", which says nothing of what the model
wrote, and a translation's rows were of the "�" re-encoded, not of the ids the decoder read."""
import pytest
import torch

from attnlab import viz
from attnlab.models import Seq2SeqTransformer
from attnlab.tasks import get_task
from attnlab.tasks.translate import runtime
from attnlab.tasks.translate.data import TranslationTokenizers
from attnlab.tasks.translate.runtime import _written, cross_attention_maps
from attnlab.tokenizers import BPETokenizer


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.fit(["один два три, tea for two"] * 20, vocab_size=280)


def byte_id(bpe, byte: int) -> int:
    # byte-level BPE's symbol of a byte from 0xA1 up is the Latin-1 character of that number
    return bpe.tokenizer.token_to_id(chr(byte))


def test_a_lone_byte_is_labelled_by_its_escape(bpe):
    ids = [*bpe.encode("t"), byte_id(bpe, 0xD0), byte_id(bpe, 0xD0)]
    assert bpe.labels(ids) == ["t", "<0xD0>", "<0xD0>"]
    assert bpe.decode(ids[1:]) == "\ufffd\ufffd"  # (what the labels were)
    # a character split between tokens is still itself on each: "д" is 0xD0 0xB4
    assert bpe.labels([byte_id(bpe, 0xD0), byte_id(bpe, 0xB4)]) == ["д", "д"]


def test_a_translations_rows_are_the_bytes_the_model_wrote(bpe, monkeypatch):
    pair = TranslationTokenizers(bpe, bpe)
    model = Seq2SeqTransformer(bpe.vocab_size, bpe.vocab_size, model_dim=16, num_heads=2,
                               num_layers=1, dim_feedforward=32, final_logits_bias=True).eval()
    lone = byte_id(bpe, 0xD0)
    model.final_logits_bias[lone] = 1e4  # an untrained model's habit: one lead byte, always
    ids = _written(model, pair, "tea for two", max_new_tokens=3)
    assert ids == [lone] * 3
    maps, keys, queries = cross_attention_maps(model, pair, "tea for two", ids)
    assert queries == ["<sos>", "<0xD0>", "<0xD0>", "<0xD0>"]
    assert maps[0].shape == (2, 4, len(keys))  # (H, T, S): the rows the decoder read
    drawn = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: drawn.append(fig) or path)
    viz.plot_attention(maps, keys, queries, "unused.png", kind="cross")
    ax = next(ax for ax in drawn[0].axes if ax.get_title().startswith("cross"))
    assert [t.get_text() for t in ax.get_yticklabels()] == queries


@pytest.fixture
def lone_byte_run(bpe, monkeypatch):
    """(task, a translate run's settings maker, the model always writing the lead byte 0xD0,
    the searches its generate was asked for): the run's loading replaced by that model."""
    task = get_task("translate")
    pair = TranslationTokenizers(bpe, bpe)
    model = Seq2SeqTransformer(bpe.vocab_size, bpe.vocab_size, model_dim=16, num_heads=2,
                               num_layers=1, dim_feedforward=32, final_logits_bias=True).eval()
    model.final_logits_bias[byte_id(bpe, 0xD0)] = 1e4
    searches = []
    generate = model.generate
    monkeypatch.setattr(model, "generate", lambda *args, **kwargs: searches.append(
        (kwargs["num_beams"], kwargs["length_penalty"])) or generate(*args, **kwargs))
    monkeypatch.setattr(runtime, "load", lambda task, run_dir, cfg: (model, pair))

    def settings(beam):
        return task.config(beam=beam, length_penalty=0.6 if beam > 1 else 1.0,
                           max_target_len=3)
    return task, settings, model, searches


LONE_ROWS = ["<sos>", "<0xD0>", "<0xD0>", "<0xD0>"]


@pytest.mark.parametrize("beam", [1, 3])
def test_view_and_plot_rows_are_the_bytes_of_the_runs_own_search(lone_byte_run, beam):
    """`plot attention` and `view` of a translate run: the rows are the ids the model wrote
    (not its "�" decoded and re-encoded), searched as `attnlab translate` searches (the run's
    --beam and --length-penalty; they drew the greedy one), each search done once."""
    task, settings, _, searches = lone_byte_run
    cfg = settings(beam)
    maps, keys, queries = runtime.attention_maps(task, "unused", cfg, "tea for two")
    assert queries == LONE_ROWS and maps[0].shape == (2, 4, len(keys))  # (H, T, S)
    layers, _, _ = runtime.attention_layers(task, "unused", cfg, "tea for two")
    assert [list(layer.query_tokens) for layer in layers if layer.kind != "self"] == [
        LONE_ROWS, LONE_ROWS]  # the decoder's self-attention and its cross-attention
    assert searches == [(beam, cfg.length_penalty)] * 2


@pytest.mark.parametrize("beam", [1, 3])
def test_the_training_figures_rows_are_the_bytes_of_the_runs_own_search(lone_byte_run, beam,
                                                                        bpe, monkeypatch):
    """cross_attention.png of a translate run: its rows are labelled by the ids the model
    wrote for the test's first source, searched as the test metrics were."""
    _, settings, model, searches = lone_byte_run
    cfg = settings(beam)
    drawn = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: drawn.append(fig) or path)
    runtime._cross_attention_figure(model, TranslationTokenizers(bpe, bpe), "tea for two", cfg,
                                    "unused.png", weights="final weights")
    ax = next(ax for ax in drawn[0].axes if ax.get_title().startswith("cross"))
    assert [t.get_text() for t in ax.get_yticklabels()] == LONE_ROWS
    assert searches == [(beam, cfg.length_penalty)]
