"""Hugging Face interop: copied weights give the same outputs (tiny random configs, nothing
downloaded). Tolerances: fp32, atol 1e-5 / rtol 1e-5 unless stated."""
import pytest
import torch
from torch.testing import assert_close

from .conftest import transformers  # noqa: E402  (imported when a test first uses it)
from attnlab.interop import from_hf, to_hf  # noqa: E402
from attnlab.models.bert import BertEncoder  # noqa: E402
from attnlab.models.causal_lm import CausalLM  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)


def tiny_gpt2(**overrides):
    cfg = dict(vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=64,
               bos_token_id=None, eos_token_id=None, pad_token_id=None)
    cfg.update(overrides)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**cfg)).eval()


def bert_config(**overrides):
    cfg = dict(vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=48, max_position_embeddings=40, type_vocab_size=2,
               layer_norm_eps=1e-12)
    cfg.update(overrides)
    return cfg


def padded_batch(vocab: int, lengths=(9, 6, 3), low: int = 4):
    T = max(lengths)
    ids = torch.randint(low, vocab, (len(lengths), T))
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()  # right padding
    return ids.masked_fill(mask == 0, 1), mask


# ---- GPT-2 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["gelu_new", "gelu", "relu"])
def test_gpt2_logits_match(activation):
    hf = tiny_gpt2(activation_function=activation, n_inner=40, layer_norm_epsilon=1e-6)
    ours = from_hf(hf)
    assert isinstance(ours, CausalLM) and not ours.training
    ids = torch.randint(0, 97, (2, 11))
    with torch.no_grad():
        assert_close(ours(ids), hf(ids).logits, **TOL)


def test_gpt2_untied_head_is_copied():
    hf = tiny_gpt2(tie_word_embeddings=False)
    with torch.no_grad():
        hf.lm_head.weight.normal_()
    ours = from_hf(hf)
    assert ours.lm_head.weight.data_ptr() != ours.token_embedding.weight.data_ptr()
    ids = torch.randint(0, 97, (1, 7))
    with torch.no_grad():
        assert_close(ours(ids), hf(ids).logits, **TOL)


def test_gpt2_converts_in_the_default_dtype():
    """Under torch.set_default_dtype(torch.float64) a GPT-2 converts to float64, its logits
    those of the float64 transformers model (it had become float32 whatever the default)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        hf = tiny_gpt2()
        model = from_hf(hf)
        ids = torch.randint(0, 97, (2, 7))
        with torch.no_grad():
            logits = model(ids)
            reference = hf(ids).logits
    finally:
        torch.set_default_dtype(previous)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert_close(logits, reference, atol=1e-10, rtol=1e-10)


def test_gpt2_greedy_generations_identical():
    hf = tiny_gpt2()
    ours = from_hf(hf)
    ids = torch.randint(0, 97, (2, 5))
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20,
                           do_sample=False, pad_token_id=0)
    assert torch.equal(ours.generate(ids, 20), expected)
    assert torch.equal(ours.generate(ids, 20, use_cache=False), expected)


def test_gpt2_padded_greedy_generation_matches_hf_left_padding():
    hf = tiny_gpt2()
    ours = from_hf(hf)
    ids = torch.randint(3, 97, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding, as Hugging Face wants for decoder-only generation
    ids[1, :3] = 0
    expected = hf.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
                           pad_token_id=0)
    assert torch.equal(ours.generate(ids, 12, attention_mask=mask), expected)


def test_round_trip_causal_lm_to_gpt2_and_back():
    lm = CausalLM(61, model_dim=24, num_heads=3, num_layers=2, dim_feedforward=40, max_len=32,
                  activation="gelu_tanh", layer_norm_eps=1e-6).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a dropped copy would show
        for name, p in lm.named_parameters():
            if "norm" in name or "bias" in name:
                p.normal_(0, 0.5)
    hf = to_hf(lm, eos_token_id=2, pad_token_id=0)
    assert isinstance(hf, transformers.GPT2LMHeadModel)
    back = from_hf(hf)
    ids = torch.randint(0, 61, (3, 9))
    with torch.no_grad():
        assert_close(hf(ids).logits, lm(ids), **TOL)
        assert_close(back(ids), lm(ids), **TOL)
    for (name, a), (_, b) in zip(lm.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("setting", [dict(positional="rope"), dict(norm_first=False),
                                     dict(bias=False), dict(positional="sinusoidal")])
def test_to_hf_refuses_what_gpt2_cannot_represent(setting):
    lm = CausalLM(20, model_dim=16, num_heads=2, num_layers=1, **setting)
    key = next(iter(setting))
    with pytest.raises(ValueError, match=key):
        to_hf(lm)


@pytest.mark.slow  # building a T5 imports torch._dynamo: about 6 s of CPU, once per worker
def test_from_hf_refuses_unknown_models():
    t5 = transformers.T5Config(vocab_size=20, d_model=16, d_kv=4, d_ff=16, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="unsupported model"):
        from_hf(transformers.T5EncoderModel(t5))


@pytest.mark.parametrize("flag", ["is_decoder", "add_cross_attention"])
def test_from_hf_refuses_a_bert_built_as_a_causal_decoder(flag):
    """A BERT with is_decoder=True (BertLMHeadModel's) masks causally; converted as an encoder
    it once gave other outputs at every position but the last, without a word."""
    hf = transformers.BertModel(transformers.BertConfig(**bert_config(**{flag: True,
                                                                         "is_decoder": True})))
    with pytest.raises(ValueError, match="is_decoder=True .a causal decoder. is not supported"):
        from_hf(hf)


# ---- BERT family ----------------------------------------------------------------------------
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_bert_hidden_states_with_padding(hidden_act):
    hf = transformers.BertModel(transformers.BertConfig(**bert_config(hidden_act=hidden_act))).eval()
    ours = from_hf(hf)
    assert isinstance(ours, BertEncoder)
    ids, mask = padded_batch(101)
    types = torch.randint(0, 2, ids.shape)
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        got = ours(ids, attention_mask=mask, token_type_ids=types)
    real = mask.bool()  # padded positions carry no meaning; compare real tokens only
    assert_close(got[real], expected[real], **TOL)
    with torch.no_grad():  # and without a mask or token types
        assert_close(ours(ids), hf(input_ids=ids).last_hidden_state, **TOL)


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_pooler_output_matches_on_a_padded_batch(model_type):
    if model_type == "bert":
        hf = transformers.BertModel(transformers.BertConfig(**bert_config())).eval()
    else:
        cfg = bert_config(type_vocab_size=1, max_position_embeddings=42, pad_token_id=1)
        hf = transformers.RobertaModel(transformers.RobertaConfig(**cfg)).eval()
    ours = from_hf(hf)
    ids, mask = padded_batch(101)
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask).pooler_output
        got = ours.pool(ours(ids, attention_mask=mask))
    assert got.shape == (3, 32)
    assert_close(got, expected, **TOL)


def test_models_without_a_pooler_say_so():
    no_pool = transformers.BertModel(transformers.BertConfig(**bert_config()),
                                     add_pooling_layer=False).eval()
    distil = transformers.DistilBertModel(transformers.DistilBertConfig(
        vocab_size=101, dim=32, n_layers=1, n_heads=4, hidden_dim=48)).eval()
    for hf in (no_pool, distil):
        ours = from_hf(hf)
        assert ours.pooler is None
        with pytest.raises(ValueError, match="no pooler"):
            ours.pool(ours(torch.randint(4, 101, (1, 5))))


def test_bert_padding_does_not_change_real_tokens():
    hf = transformers.BertModel(transformers.BertConfig(**bert_config())).eval()
    ours = from_hf(hf)
    ids, mask = padded_batch(101)
    with torch.no_grad():
        batch = ours(ids, attention_mask=mask)
        alone = ours(ids[2:, :3])
    assert_close(batch[2, :3], alone[0], **TOL)


def test_task_model_converts_its_base_encoder():
    clf = transformers.BertForSequenceClassification(transformers.BertConfig(**bert_config())).eval()
    ours = from_hf(clf)
    ids = torch.randint(0, 101, (2, 8))
    with torch.no_grad():
        assert_close(ours(ids), clf.bert(input_ids=ids).last_hidden_state, **TOL)


def test_roberta_positions_count_from_the_padding_id():
    cfg = bert_config(type_vocab_size=1, max_position_embeddings=42, pad_token_id=1,
                      layer_norm_eps=1e-5)
    hf = transformers.RobertaModel(transformers.RobertaConfig(**cfg)).eval()
    ours = from_hf(hf)
    ids, mask = padded_batch(101)  # padding id 1, as RoBERTa's
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask)
    assert_close(got[mask.bool()], expected[mask.bool()], **TOL)


def test_distilbert_hidden_states_with_padding():
    cfg = transformers.DistilBertConfig(vocab_size=101, dim=32, n_layers=2, n_heads=4,
                                        hidden_dim=48, max_position_embeddings=40)
    hf = transformers.DistilBertModel(cfg).eval()
    ours = from_hf(hf)
    ids, mask = padded_batch(101)
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask)
    assert_close(got[mask.bool()], expected[mask.bool()], **TOL)


# ---- tokenizers saved to and loaded from a local directory ----------------------------------
def test_local_hf_tokenizer_works_with_converted_models(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a", "dog"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                                pad_token="[PAD]", cls_token="[CLS]",
                                                sep_token="[SEP]")
    fast.save_pretrained(tmp_path)
    loaded = transformers.AutoTokenizer.from_pretrained(tmp_path)  # local directory, no network
    enc = loaded(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    assert enc["attention_mask"].sum(1).tolist() == [6, 2]

    bert = transformers.BertModel(transformers.BertConfig(**bert_config(vocab_size=len(words)))).eval()
    ours = from_hf(bert)
    with torch.no_grad():
        expected = bert(**enc).last_hidden_state
        got = ours(enc["input_ids"], attention_mask=enc["attention_mask"],
                   token_type_ids=enc.get("token_type_ids"))
    real = enc["attention_mask"].bool()
    assert_close(got[real], expected[real], **TOL)

    gpt2 = tiny_gpt2(vocab_size=len(words))
    lm = from_hf(gpt2)
    prompt = loaded("the cat", return_tensors="pt")["input_ids"]
    out = lm.generate(prompt, 4)
    assert torch.equal(out, gpt2.generate(prompt, attention_mask=torch.ones_like(prompt),
                                          max_new_tokens=4, do_sample=False, pad_token_id=0))
    assert loaded.decode(out[0, :2]) == "the cat"


@pytest.mark.slow
def test_importing_interop_does_not_import_transformers():
    import subprocess
    import sys

    code = ("import sys, attnlab.interop, attnlab.models.causal_lm; "
            "sys.exit('transformers' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
