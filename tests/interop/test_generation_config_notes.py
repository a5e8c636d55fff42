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
          "without a top-k: give --top-k 50 to sample as transformers does")
GREEDY = ("with no do_sample in it, transformers' generate decodes greedily and attnlab samples: "
          "give --greedy to decode as transformers does")


@pytest.mark.parametrize("given, config, said", [
    ({}, {"do_sample": True, "temperature": 0.6, "top_p": 0.9}, TOP_50),  # Llama 3 Instruct's
    ({}, {"do_sample": True, "top_k": None}, TOP_50),  # null: transformers' default too
    ({"temperature": 1.0, "top_p": 0.5}, {"do_sample": True}, TOP_50),  # the file decides nothing
    ({}, {"do_sample": True, "top_k": 0}, None),  # transformers' "no top-k": as attnlab
    ({}, {"do_sample": True, "top_k": 20}, None),
    ({"top_k": 5}, {"do_sample": True}, None),  # a --top-k given
    ({"greedy": True}, {"do_sample": True}, None),
    ({}, {"temperature": 0.7, "top_p": 0.8}, GREEDY),  # no do_sample: transformers' False
    ({"seed": 3}, {"temperature": 0.7}, None),  # a flag that samples given
    ({"greedy": False}, {"temperature": 0.7}, None),
    ({}, {"eos_token_id": 2}, None),  # no sampling value: the file decides nothing (GPT-2's)
])
def test_a_note_names_where_transformers_defaults_decode_otherwise(tmp_path, given, config,
                                                                   said):
    """Llama 3's Instruct files say do_sample, temperature 0.6, top_p 0.9 and no top_k:
    transformers samples among 50 tokens there, attnlab without a top-k; and a file with a
    temperature but no do_sample is greedy in transformers. The note said "sampling with
    --temperature ..., from" the file, as if that were how transformers decodes it too."""
    (tmp_path / "generation_config.json").write_text(json.dumps(config), encoding="utf-8")
    note = resolve({**GIVEN, **given}, read_sampling(tmp_path))[1] or ""
    for text in (TOP_50, GREEDY):
        assert (text in note) == (text == said), note
    assert note.count("note:") == int(bool(note)) and "\n" not in note  # one line


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


@pytest.mark.slow
def test_transformers_decodes_a_file_with_a_temperature_but_no_do_sample_greedily(tmp_path):
    """The other claim, on transformers' generate: the file's temperature and top_p without
    do_sample leave it greedy (the same ids whatever the seed, those of do_sample=False)."""
    from .conftest import transformers
    from .test_llama_family import save_family

    save_family(tmp_path, "qwen2")
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.7, "top_p": 0.8}), encoding="utf-8")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    prompt = torch.tensor([[5, 6, 7]])
    runs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        runs.append(hf.generate(prompt, max_new_tokens=8, pad_token_id=0).tolist())
    greedy = hf.generate(prompt, max_new_tokens=8, pad_token_id=0, do_sample=False).tolist()
    assert runs[0] == runs[1] == greedy
