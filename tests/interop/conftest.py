"""Shared by the interop tests: every test starts from seed 0 with transformers' warnings and
progress bars off."""
import subprocess
import sys

import pytest
import torch


class _OnFirstUse:
    """``transformers``, imported when a test first reads one of its names, not when its module
    is collected (every pytest-xdist worker collects every module; ``make test-fast`` runs
    these tests on one of them); absent, the test that reads it is skipped."""

    def __getattr__(self, name: str):
        return getattr(pytest.importorskip("transformers"), name)


transformers = _OnFirstUse()


@pytest.fixture(autouse=True)
def _seed():
    # one thread: tiny models on a shared 2-core machine run many times faster without
    # OpenMP threads spinning against each other
    transformers = pytest.importorskip("transformers")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # save_pretrained's "Writing model shards"
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def same_greedy():
    """``check(hf, ours, src, src_mask, eos)``: Hugging Face's greedy ids for a seq2seq model
    equal attnlab's, with and without the cache; returns them ((B, 1 + N), start token first)."""
    def check(hf, ours, src, src_mask, eos, max_new_tokens=12):
        expected = hf.generate(src, attention_mask=src_mask, max_new_tokens=max_new_tokens,
                               do_sample=False, num_beams=1, eos_token_id=eos)
        for use_cache in (True, False):
            got = ours.generate(src, max_new_tokens, src_mask=src_mask, eos_token_id=eos,
                                use_cache=use_cache)
            assert torch.equal(got, expected), f"use_cache={use_cache}"
        return expected
    return check


def cli_without_torch(argv: list[str]) -> subprocess.CompletedProcess:
    """``attnlab`` with ``argv`` in a fresh interpreter that fails if torch was imported by the
    time it returns: a refusal that should come before torch is loaded. Exits with main's code."""
    code = ("import sys; from attnlab.cli import main; "
            f"rc = main({argv!r}); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
