"""What ``attnlab generate DIR`` says of DIR's ``generation_config.json`` keys that it does not
apply (``attnlab.interop.generation_config``): every key that changes the text
``transformers``' ``generate`` gives is named in the note, and a key written as null (as
transformers 5 writes each one it leaves unset) is not, since it does nothing there either."""
import json

import pytest

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
    note = _note(tmp_path, {"do_sample": True, "temperature": 0.7, "repetition_penalty": None,
                            "num_beams": None, "min_p": None, "top_h": None})
    assert note == (f"note: sampling with --temperature 0.7, from "
                    f"{tmp_path}/generation_config.json; a flag given wins")
