"""The fused attention path never materialises the (B, H, T, T) score matrix."""
import pytest

from benchmarks.attention_memory import measure


@pytest.mark.slow
def test_fused_attention_peak_memory_is_far_below_the_score_matrix():
    B, D, H, T = 1, 256, 8, 2048
    scores_mib = B * H * T * T * 4 / 2**20  # 128 MiB: one float32 (B, H, T, T) matrix
    fused = measure("fused", T, B, D, H, masked=True, backward=False)
    reference = measure("reference", T, B, D, H, masked=True, backward=False)
    assert reference > scores_mib, "the reference path should build the full score matrix"
    assert fused < scores_mib / 4, f"fused attention peaked at {fused:.0f} MiB"
