"""attnlab.generation: next-token selection (top-k, top-p, temperature), decoding loops."""
import pytest
import torch
import torch.nn.functional as F

from attnlab.generation import (
    beam_search, decode, decode_stream, filter_top_k, filter_top_p, select_next_token,
)

NEG = float("-inf")


# ---- filter_top_k ----------------------------------------------------------------------
def test_top_k_keeps_the_k_largest_per_row():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [4.0, -1.0, 5.0, 6.0]])
    out = filter_top_k(logits, 2)
    expected = torch.tensor([[NEG, 3.0, 2.0, NEG], [NEG, NEG, 5.0, 6.0]])
    torch.testing.assert_close(out, expected)  # exact: values are copied, not computed


def test_top_k_keeps_ties_and_all_when_k_is_large():
    logits = torch.tensor([[2.0, 2.0, 1.0]])
    assert torch.isfinite(filter_top_k(logits, 1)).tolist() == [[True, True, False]]
    torch.testing.assert_close(filter_top_k(logits, 10), logits)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_top_k_rejects_non_positive_k(k):
    with pytest.raises(ValueError, match=r"top_k must be a positive integer, got"):
        filter_top_k(torch.zeros(1, 3), k)


# ---- filter_top_p ----------------------------------------------------------------------
def test_top_p_keeps_the_smallest_nucleus_reaching_p():
    probs = torch.tensor([[0.1, 0.5, 0.3, 0.1]])
    logits = probs.log()
    kept = lambda p: torch.isfinite(filter_top_p(logits, p))[0].tolist()  # noqa: E731
    assert kept(0.5) == [False, True, False, False]  # 0.5 alone reaches 0.5
    assert kept(0.6) == [False, True, True, False]  # 0.5 + 0.3
    assert kept(0.85).count(True) == 3  # 0.9 reached by three tokens; a fourth is not needed
    assert kept(1.0) == [True, True, True, True]


def test_top_p_always_keeps_at_least_one_token():
    logits = torch.tensor([[0.0, 10.0, 0.0]])  # the top token holds ~0.9999 of the mass
    out = filter_top_p(logits, 1e-6)
    assert torch.isfinite(out)[0].tolist() == [False, True, False]
    assert out[0, 1] == 10.0


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_top_p_rejects_values_outside_0_1(p):
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got"):
        filter_top_p(torch.zeros(1, 3), p)


# ---- select_next_token -----------------------------------------------------------------
def test_greedy_selection_is_the_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0], [5.0, 0.0, 4.9]])
    assert select_next_token(logits).tolist() == [1, 0]


def test_sampling_is_reproducible_with_a_generator_and_respects_top_k():
    logits = torch.randn(64, 20)
    a = select_next_token(logits, do_sample=True, top_k=3, generator=torch.Generator().manual_seed(1))
    b = select_next_token(logits, do_sample=True, top_k=3, generator=torch.Generator().manual_seed(1))
    assert a.tolist() == b.tolist()
    top3 = logits.topk(3, dim=-1).indices
    assert (top3 == a[:, None]).any(dim=-1).all()


def test_sampling_frequencies_follow_the_softmax_with_temperature():
    logits = torch.tensor([[0.0, 1.0, 2.0]]).expand(20000, 3)
    g = torch.Generator().manual_seed(0)
    ids = select_next_token(logits, do_sample=True, temperature=2.0, generator=g)
    freq = torch.bincount(ids, minlength=3).float() / ids.numel()
    expected = (logits[0] / 2.0).softmax(-1)
    # 20,000 draws: the standard error of each frequency is below 0.004
    torch.testing.assert_close(freq, expected, atol=0.02, rtol=0)


def test_top_p_sampling_never_leaves_the_nucleus():
    logits = torch.tensor([[3.0, 2.9, -5.0, -5.0]]).expand(500, 4)
    ids = select_next_token(logits, do_sample=True, top_p=0.9, generator=torch.Generator().manual_seed(0))
    assert set(ids.tolist()) == {0, 1}


@pytest.mark.parametrize("temperature, said", [
    (0.0, r"^temperature 0.0 is too small .*greedy decoding \(--greedy, do_sample=False\)"),
    (-1.0, r"^temperature must be > 0, got -1.0$")])
def test_select_rejects_non_positive_temperature(temperature, said):
    """0, the usual way to ask for greedy decoding elsewhere, is told what gives it here."""
    with pytest.raises(ValueError, match=said):
        select_next_token(torch.zeros(1, 3), do_sample=True, temperature=temperature)


def test_select_rejects_logits_that_are_not_2d():
    with pytest.raises(ValueError, match=r"logits must be \(B, V\), got shape \(3,\)"):
        select_next_token(torch.zeros(3))


# ---- decoding loops with hand-made step functions --------------------------------------
PAD, START, EOS, A, B = 0, 1, 2, 3, 4


class Counter:
    """Next token = last + 1 (mod V), as one-hot logits; records the batch size of each call."""

    def __init__(self, V=10, reorderable=True):
        self.V, self.sizes, self.reorders = V, [], []
        if not reorderable:
            self.reorder = None

    def __call__(self, tokens):
        self.sizes.append(tokens.shape[0])
        return F.one_hot((tokens[:, -1] + 1) % self.V, self.V).float()

    def reorder(self, index):  # noqa: F811 (instances may switch it off)
        self.reorders.append(index.tolist())


class Table:
    """A first-order Markov model: p(next | last) from a table of probabilities (V, V)."""

    def __init__(self, probs):
        self.logits = torch.tensor(probs).clamp_min(1e-9).log()

    def __call__(self, tokens):
        return self.logits[tokens[:, -1]]

    def reorder(self, index):
        pass


def test_decode_appends_until_each_row_emits_eos_then_pads():
    step = Counter(V=10)
    out = decode(step, torch.tensor([[5], [7], [8]]), 6, eos_token_id=9)
    # row 0: 6 7 8 9(eos); row 1: 8 9; row 2: 9 — the result is as long as the longest row
    assert out.tolist() == [[5, 6, 7, 8, 9], [7, 8, 9, 0, 0], [8, 9, 0, 0, 0]]
    assert step.sizes == [3, 2, 1, 1]  # finished rows leave the batch
    assert step.reorders == [[0, 1], [0]]


def test_decode_without_reorder_gives_the_same_tokens():
    kept, plain = Counter(V=10), Counter(V=10, reorderable=False)
    ids = torch.tensor([[5], [7], [8]])
    assert decode(kept, ids, 6, eos_token_id=9).tolist() == decode(plain, ids, 6, eos_token_id=9).tolist()
    assert plain.sizes == [3, 3, 3, 3]


def test_decode_without_eos_runs_max_new_tokens():
    out = decode(Counter(V=4), torch.tensor([[0, 1]]), 5)
    assert out.tolist() == [[0, 1, 2, 3, 0, 1, 2]]


def test_sampled_decoding_is_reproducible_with_a_generator():
    step = Table([[0.25] * 4] * 4)
    ids = torch.zeros(6, 1, dtype=torch.long)
    a = decode(step, ids, 8, do_sample=True, generator=torch.Generator().manual_seed(3))
    b = decode(step, ids, 8, do_sample=True, generator=torch.Generator().manual_seed(3))
    assert a.tolist() == b.tolist() and len({tuple(r) for r in a.tolist()}) > 1


def test_decode_stream_yields_each_steps_tokens_as_decode_returns_them():
    """The one token loop every model goes through: streamed tokens (B, 1), ordinary tensors,
    inference mode never left on between them, the same as ``decode``."""
    ids = torch.tensor([[5], [7], [8]])
    step = Counter(V=10)
    tokens = []
    for token in decode_stream(step, ids, 6, eos_token_id=9):
        assert token.shape == (3, 1) and not token.is_inference()
        assert not torch.is_inference_mode_enabled()
        tokens.append(token)
    assert torch.cat([ids, *tokens], 1).tolist() == decode(Counter(V=10), ids, 6,
                                                           eos_token_id=9).tolist()
    assert step.sizes == [3, 2, 1, 1] and step.reorders == [[0, 1], [0]]
    with pytest.raises(ValueError, match="temperature"):
        next(decode_stream(step, ids, 2, do_sample=True, temperature=0.0))


#            to: pad  start eos   A     B
GREEDY_TRAP = [[0.0, 0.0, 1.0, 0.0, 0.0],    # from pad
               [0.0, 0.0, 0.0, 0.6, 0.4],    # from start: A is likelier ...
               [0.0, 0.0, 1.0, 0.0, 0.0],    # from eos
               [0.0, 0.0, 0.28, 0.37, 0.35],  # ... but after A nothing is sure
               [0.0, 0.0, 1.0, 0.0, 0.0]]    # after B, EOS for sure: p(B eos) = 0.4 > 0.6·0.37


def test_beam_search_finds_the_likelier_sequence_that_greedy_misses():
    start = torch.tensor([[START]])
    greedy = decode(Table(GREEDY_TRAP), start, 4, eos_token_id=EOS)
    beam = beam_search(Table(GREEDY_TRAP), start, 4, num_beams=2, eos_token_id=EOS)
    assert greedy.tolist() == [[START, A, A, A, A]]
    assert beam.tolist() == [[START, B, EOS]]


def test_one_beam_is_greedy_on_a_batch():
    start = torch.tensor([[START], [A], [B]])
    greedy = decode(Table(GREEDY_TRAP), start, 4, eos_token_id=EOS)
    assert beam_search(Table(GREEDY_TRAP), start, 4, num_beams=1, eos_token_id=EOS).tolist() == greedy.tolist()


#          to: pad  start eos  A    B
SHORT_OR_LONG = [[0, 0, 1.0, 0, 0],
                 [0, 0, 0.5, 0.4, 0.1],  # stop now (0.5), or A (0.4) ...
                 [0, 0, 1.0, 0, 0],
                 [0, 0, 0.0, 0.0, 1.0],  # ... then B
                 [0, 0, 1.0, 0.0, 0.0]]  # then EOS: p(A B eos) = 0.4 over 3 tokens


@pytest.mark.parametrize("length_penalty, expected", [(0.0, [START, EOS]), (1.0, [START, A, B, EOS])])
def test_length_penalty_divides_the_log_probability_by_length(length_penalty, expected):
    # lp=0: log 0.5 > log 0.4, the short one wins; lp=1: log(0.4)/3 = -0.31 > log(0.5)/1 = -0.69
    out = beam_search(Table(SHORT_OR_LONG), torch.tensor([[START]]), 5, num_beams=2,
                      length_penalty=length_penalty, eos_token_id=EOS)
    assert out.tolist() == [expected]


def test_beam_search_pads_rows_to_the_longest_and_keeps_the_prompt():
    out = beam_search(Table(SHORT_OR_LONG), torch.tensor([[START], [A]]), 5, num_beams=2,
                      length_penalty=1.0, eos_token_id=EOS)
    assert out.tolist() == [[START, A, B, EOS], [A, B, EOS, PAD]]


def test_decoding_errors_show_the_values():
    with pytest.raises(ValueError, match=r"max_new_tokens must be a positive integer, got 0"):
        decode(Counter(), torch.tensor([[1]]), 0)
    with pytest.raises(ValueError, match=r"input_ids must be \(B, T\) with T >= 1, got shape \(3,\)"):
        decode(Counter(), torch.tensor([1, 2, 3]), 2)
    with pytest.raises(ValueError, match=r"num_beams must be a positive integer, got 0"):
        beam_search(Counter(), torch.tensor([[1]]), 2, num_beams=0)
    with pytest.raises(ValueError, match=r"beam search needs a step function with reorder"):
        beam_search(lambda t: torch.zeros(1, 3), torch.tensor([[1]]), 2, num_beams=2)


def test_a_list_of_eos_ids_stops_a_row_at_any_of_them():
    """Hugging Face's generation configs often hold several EOS ids; a list once stopped no
    row at all, without a word."""
    from attnlab.generation import decode
    from attnlab.models import CausalLM

    step = lambda tokens: torch.nn.functional.one_hot((tokens[:, -1] + 1) % 5, 5).float()  # noqa: E731
    out = decode(step, torch.tensor([[0], [2], [3]]), 4, eos_token_id=[2, 4], pad_token_id=9)
    assert out.tolist() == [[0, 1, 2], [2, 3, 4], [3, 4, 9]]  # ends once every row has
    assert decode(step, torch.tensor([[0]]), 4, eos_token_id=[2]).tolist() == [[0, 1, 2]]
    lm = CausalLM(5, model_dim=8, num_heads=2, num_layers=1, dim_feedforward=16, max_len=16).eval()
    free = lm.generate(torch.tensor([[1], [3]]), 5)
    eos = [int(free[0, 2]), int(free[1, 2])]  # the second new token of each row
    stopped = lm.generate(torch.tensor([[1], [3]]), 5, eos_token_id=eos)
    for row in range(2):  # each row ends at its own id; the first id of the list pads
        cut = next(i for i in range(1, 6) if int(free[row, i]) in eos)
        assert stopped[row, : cut + 1].tolist() == free[row, : cut + 1].tolist()
        assert set(stopped[row, cut + 1:].tolist()) <= {eos[0]}
