"""``attnlab export --hf`` of an lm run writes how ``attnlab generate RUN`` samples into
``generation_config.json`` (do_sample true, top_k 0; temperature 1 and no top_p are the
defaults): without them ``transformers``' ``generate`` decoded the exported model greedily,
the same text whatever the seed, where ``attnlab generate`` samples; and told to sample, it drew among its default 50 most
likely tokens, where attnlab draws among all.

The distributions are compared on the same logits (the run's, and the exported model's next
scores after transformers' warpers) at atol 1e-6, rtol 1e-5, as
``test_generation_hf_sampling.py`` compares them."""
import pytest
import torch
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.generation import sampling_scores
from attnlab.interop.generation_config import read_sampling
from attnlab.settings import SamplingSettings

from .conftest import transformers  # noqa: F401  (skips without the hf extra)

# 80 distinct words: a word tokenizer's vocabulary beyond transformers' default top-k of 50
WORDS = [f"w{i}" for i in range(80)]
STEPS = ["--max-steps", "2", "--warmup", "1", "--model-dim", "16", "--num-layers", "1",
         "--batch-size", "4", "--threads", "1", "--num-heads", "2", "--dim-feedforward", "32",
         "--block-size", "16", "--tokenizer", "word"]


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("arch", [[], ["--arch", "llama"]])
def test_transformers_samples_an_exported_lm_run_as_attnlab_generate_does(arch, tmp_path,
                                                                          capsys):
    from transformers import AutoModelForCausalLM, GenerationConfig

    text = tmp_path / "text.txt"
    text.write_text(" ".join(WORDS * 4) + "\n", encoding="utf-8")
    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "lm", "--data", str(text), "--out", str(run), *STEPS, *arch]) == 0
    assert main(["export", str(run), "--hf", str(out)]) == 0
    # as transformers reads it back (transformers 4 saves only the keys off its defaults)
    written = GenerationConfig.from_pretrained(out)
    assert (written.do_sample, written.top_k) == (True, 0)
    assert written.temperature in (None, 1.0) and written.top_p in (None, 1.0)  # 5's, 4's
    capsys.readouterr()
    assert main(["generate", str(out), "--prompt", "w3", "--max-new-tokens", "2",
                 "--seed", "0"]) == 0
    # the export's own file decides nothing (it said "sampling with --temperature 1.0 ...")
    assert "generation_config.json" not in capsys.readouterr().err
    ours, tokenizer = attnlab.load(run)
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    assert hf.config.vocab_size > 50
    prompt = torch.tensor([tokenizer.encode("w3 w4 w5")])
    with torch.no_grad():
        logits = ours(prompt)[:, -1]  # (1, V)
        drawn = hf.generate(prompt, max_new_tokens=1, output_scores=True,
                            return_dict_in_generate=True, pad_token_id=0)
    defaults = SamplingSettings()
    expected = sampling_scores(logits, defaults.temperature, defaults.top_k,
                               defaults.top_p).softmax(-1)
    theirs = drawn.scores[0].softmax(-1)
    assert_close(theirs, expected, atol=1e-6, rtol=1e-5)
    assert torch.equal(theirs > 0, expected > 0)  # every token can be drawn, as in attnlab
    texts = set()
    for seed in range(4):  # it samples: not the same greedy text whatever the seed
        torch.manual_seed(seed)
        with torch.no_grad():
            texts.add(tuple(hf.generate(prompt, max_new_tokens=6, pad_token_id=0)[0].tolist()))
    assert len(texts) > 1
    # attnlab reads the file back as it wrote it: sampling, no top-k, no note
    back = read_sampling(out)
    assert back.do_sample is True and "top_k" not in back.values and not back.not_applied
