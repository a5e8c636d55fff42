"""What ``attnlab generate DIR`` says of DIR's ``generation_config.json`` keys that it does not
apply (``attnlab.interop.generation_config``): every key that changes the text
``transformers``' ``generate`` gives is named in the note, and a key written as null (as
transformers 5 writes each one it leaves unset) is not, since it does nothing there either."""
import json

import pytest
import torch

from attnlab.interop.generation_config import read_sampling, resolve

GIVEN = {"greedy": None, "temperature": None, "top_k": None, "top_p": None, "seed": None}


def _note(tmp_path, config):
    (tmp_path / "generation_config.json").write_text(json.dumps(config), encoding="utf-8")
    return resolve(GIVEN, read_sampling(tmp_path))[1]


@pytest.mark.parametrize("key, value", [
    ("top_h", 0.3), ("dola_layers", "high"), ("stop_strings", ["\n\n"]),
    ("watermarking_config", {"greenlist_ratio": 0.25}), ("token_healing", True),
    ("force_words_ids", [[5]])])
def test_a_key_that_changes_transformers_text_is_named_as_not_applied(key, value, tmp_path):
    note = _note(tmp_path, {"do_sample": True, "temperature": 0.7, key: value})
    assert f"its {key} {json.dumps(value)} is not applied" in note, note


def test_keys_written_as_null_are_not_named(tmp_path):
    note = _note(tmp_path, {"do_sample": True, "temperature": 0.7, "top_k": 20,
                            "repetition_penalty": None, "num_beams": None, "min_p": None,
                            "top_h": None})
    assert note == (f"note: sampling with --temperature 0.7 --top-k 20, from "
                    f"{tmp_path}/generation_config.json; a flag given wins")


TOP_50 = ("transformers' generate samples among its default 50 most likely tokens and attnlab "
          "among all: give --top-k 50 to sample as transformers does")


@pytest.mark.parametrize("given, config, said", [
    ({}, {"do_sample": True, "temperature": 0.6, "top_p": 0.9}, True),  # Llama 3 Instruct's
    ({}, {"do_sample": True, "top_k": None}, True),  # null: transformers' default too
    ({"temperature": 1.0, "top_p": 0.5}, {"do_sample": True}, True),  # the file decides nothing
    ({}, {"do_sample": True, "top_k": 0}, False),  # transformers' "no top-k": as attnlab
    ({}, {"do_sample": True, "top_k": 20}, False),
    ({"top_k": 5}, {"do_sample": True}, False),  # a --top-k given
    ({"greedy": True}, {"do_sample": True}, False),
    ({}, {"temperature": 0.6}, False),  # no do_sample: transformers decodes greedily
])
def test_a_file_that_samples_without_top_k_names_transformers_top_k_50(tmp_path, given,
                                                                       config, said):
    """Llama 3's Instruct files say do_sample, temperature 0.6, top_p 0.9 and no top_k:
    transformers samples among 50 tokens there, attnlab among all; the note said "sampling
    with --temperature 0.6 --top-p 0.9, from" the file, as if that were transformers' too."""
    (tmp_path / "generation_config.json").write_text(json.dumps(config), encoding="utf-8")
    note = resolve({**GIVEN, **given}, read_sampling(tmp_path))[1] or ""
    assert (TOP_50 in note) == said, note
    if said:
        assert note.count("note:") == 1 and "\n" not in note


@pytest.mark.slow
def test_transformers_samples_a_file_without_top_k_among_50_tokens(tmp_path):
    """What the note says of transformers, checked on its generate: the scores it samples
    from, after its warpers, keep 50 of the tiny model's 120 tokens (top_p 1, no top_k)."""
    from .conftest import transformers
    from .test_llama_family import save_family

    save_family(tmp_path, "qwen2")
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.6}), encoding="utf-8")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    out = hf.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=1, pad_token_id=0,
                      output_scores=True, return_dict_in_generate=True)
    assert hf.config.vocab_size > 50
    assert int(out.scores[0].isfinite().sum()) == 50
