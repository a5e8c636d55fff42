"""``attnlab explain``: scaled dot-product attention, step by step, on numbers you can check.

    Attention(Q, K, V) = softmax(QKᵀ / √d_k) V

Prints Q, K, V, then QKᵀ, the scaling by √d_k, the mask (if any), the softmax weights and the
weighted sum of the values. By default it uses the look-up example of docs/attention.md: keys are
one-hot "addresses", so a query that matches one key returns its value, and a query that
matches two keys equally returns the mean of their values.

    attnlab explain
    attnlab explain --q "[[0,10,0]]"                     # your query, the example's K and V
    attnlab explain --q "[[1,0]]" --k "[[1,0],[0,1]]" --v "[[1],[2]]" --mask "[[1,0]]"
"""
from __future__ import annotations

import argparse
import ast
import math

from ..errors import UsageError

EXAMPLE = {
    "q": [[0, 10, 0], [0, 0, 10], [10, 10, 0]],
    "k": [[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]],
    "v": [[1, 0, 1], [10, 0, 2], [100, 5, 0], [1000, 6, 0]],
}


def register(sub) -> None:
    p = sub.add_parser("explain", help="step-by-step scaled dot-product attention",
                       description="Print QKᵀ, the scaling by √d_k, the mask, the softmax and the "
                                   "weighted sum of values, on the built-in look-up example or on "
                                   "your own Q, K, V (nested lists, one row per query/key/value).",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example: attnlab explain --q \"[[0,10,0]]\"")
    p.add_argument("--q", metavar="LIST", help='queries, e.g. "[[0,10,0]]" (default: the example)')
    p.add_argument("--k", metavar="LIST", help="keys (default: the example's)")
    p.add_argument("--v", metavar="LIST", help="values (default: the example's)")
    p.add_argument("--mask", metavar="LIST",
                   help="1 = may attend, 0 = blocked; one row per query, or one row for all")
    p.set_defaults(func=run)


def parse_matrix(text: str, flag: str, *, numbers: bool = True) -> list[list[float]]:
    """A nested list like "[[0,10,0],[1,2,3]]" (or one flat row) -> rows of equal length."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise UsageError(f"{flag}: {text!r} is not a nested list of numbers, e.g. \"[[0,10,0]]\"") from None
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (list, tuple)):
        value = [value]  # one row
    if not (isinstance(value, (list, tuple)) and value
            and all(isinstance(r, (list, tuple)) and r for r in value)):
        raise UsageError(f"{flag}: {text!r} must be a non-empty list of non-empty rows")
    for i, row in enumerate(value):
        for j, x in enumerate(row):
            if isinstance(x, (list, tuple)):  # a batch (B, T, d) pasted, or a trailing comma
                raise UsageError(f"{flag}: row {i + 1}, column {j + 1} is a list ({x!r}), not a "
                                 f"number: give a 2-D list of numbers, one inner list per row, "
                                 f"e.g. \"[[0,10,0]]\"")
            ok = isinstance(x, (int, float)) and (not isinstance(x, bool) or not numbers)
            if not ok:
                raise UsageError(f"{flag}: {x!r} is not a finite number")
            try:
                finite = math.isfinite(float(x))  # an int beyond float64 raises OverflowError
            except OverflowError:
                finite = False
            if not finite:
                shown = f"{str(x)[:12]}…" if isinstance(x, int) else repr(x)
                raise UsageError(f"{flag}: row {i + 1}, column {j + 1} ({shown}) is not a finite "
                                 f"number (float64 reaches about ±1.8e308)")
    widths = {len(r) for r in value}
    if len(widths) > 1:
        raise UsageError(f"{flag}: rows have different lengths {sorted(widths)}")
    return [[float(x) for x in r] for r in value]


def _fmt(x: float) -> str:
    if x == float("-inf"):
        return "-inf"
    if abs(x) >= 1e9:  # not 300 digits for a huge (finite) number
        return f"{x:.6g}"
    text = f"{x:.4f}".rstrip("0").rstrip(".")  # 4 decimals, as one would check by hand
    return "0" if text in ("-0", "0", "") else text


def _show(title: str, rows, row_names=None) -> None:
    cells = [[_fmt(float(x)) for x in r] for r in rows]
    width = max(len(c) for r in cells for c in r)
    if title:
        print(title)
    for i, r in enumerate(cells):
        name = f"  {row_names[i]}: " if row_names else "  "
        print(name + "[" + ", ".join(c.rjust(width) for c in r) + "]")


def _check_finite(name: str, m, culprits: str, rows: list[str], cols: list[str]) -> None:
    """``UsageError`` naming the flags whose values overflow float64 in step ``name``."""
    import torch

    bad = (~torch.isfinite(m)).nonzero()
    if len(bad):
        i, j = (int(t) for t in bad[0])
        raise UsageError(f"{culprits}: {name} is not finite at {rows[i]}, {cols[j]} "
                         f"({float(m[i, j])}: the values overflow float64); use smaller values")


def _given(args, *flags: str) -> str:
    """The flags among ``flags`` the user gave (the example's values are small), joined."""
    given = [f for f in flags if getattr(args, f.lstrip("-"))]
    return " and ".join(given or flags)


_NAMES = {"q": "queries", "k": "keys", "v": "values"}


def _named(args, name: str) -> str:
    """Matrix ``name`` as a message names it, with its verb: by its flag where the user gave
    it, else as the example's (a user who gave only --q was told "--k rows have 3", of a flag
    never given)."""
    if getattr(args, name):
        return f"--{name} has"
    return f"the example's {_NAMES[name]} (used without --{name}) have"


def _check_shapes(args, q, k, v) -> None:
    """``UsageError`` unless queries and keys have one width and there is a value per key."""
    if len(q[0]) != len(k[0]):
        raise UsageError(f"{_named(args, 'q')} rows of {len(q[0])} numbers but "
                         f"{_named(args, 'k')} rows of {len(k[0])}: queries and keys must have "
                         f"the same width d_k")
    if len(k) != len(v):
        raise UsageError(f"{_named(args, 'k')} {len(k)} row{'s' * (len(k) != 1)} but "
                         f"{_named(args, 'v')} {len(v)}: one value per key")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..nn import scaled_dot_product

    q = parse_matrix(args.q, "--q") if args.q is not None else EXAMPLE["q"]
    k = parse_matrix(args.k, "--k") if args.k is not None else EXAMPLE["k"]
    v = parse_matrix(args.v, "--v") if args.v is not None else EXAMPLE["v"]
    _check_shapes(args, q, k, v)
    Q, K, V = (torch.tensor(m, dtype=torch.float64) for m in (q, k, v))
    mask = None
    if args.mask is not None:  # given empty: refused, not read as no mask
        rows = parse_matrix(args.mask, "--mask", numbers=False)
        if any(x not in (0.0, 1.0) for r in rows for x in r):
            raise UsageError(f"--mask: entries must be 0 or 1 (1 = may attend), got {args.mask!r}")
        if len(rows[0]) != len(k) or len(rows) not in (1, len(q)):
            # with one query the two shapes are one: not "1×4 (queries × keys) or 1×4"
            for_all = f" or 1×{len(k)} (one row for all)" if len(q) > 1 else ""
            raise UsageError(f"--mask is {len(rows)}×{len(rows[0])}; it must be {len(q)}×{len(k)} "
                             f"(queries × keys){for_all}")
        mask = torch.tensor(rows, dtype=torch.bool).expand(len(q), len(k))  # (T_q, T_k)
    d_k = Q.shape[1]
    qn = [f"q{i + 1}" for i in range(len(q))]
    kn = [f"k{j + 1}" for j in range(len(k))]

    # Every intermediate is computed and checked before anything is printed: finite inputs can
    # still overflow float64 (1e308 · 1e308 = inf), and the softmax of ±inf scores is NaN,
    # which must not be printed as if it were an answer.
    scores = Q @ K.T  # (T_q, T_k)
    scaled = scores / math.sqrt(d_k)
    out, weights = scaled_dot_product(Q, K, V, mask)  # (T_q, d_v), (T_q, T_k)
    by_key = _given(args, "--q", "--k")
    _check_finite("QKᵀ", scores, by_key, qn, kn)
    _check_finite("QKᵀ/√d_k", scaled, by_key, qn, kn)
    _check_finite("the softmax", weights, by_key, qn, kn)
    _check_finite("the weighted sum of the values", out, _given(args, "--v"), qn,
                  [f"column {c + 1}" for c in range(V.shape[1])])

    print("Attention(Q, K, V) = softmax(QKᵀ / √d_k) V    (numbers rounded to 4 decimals)\n")
    _show(f"Q (queries, {len(q)}×{d_k}):", Q, qn)
    _show(f"K (keys, {len(k)}×{d_k}):", K, kn)
    _show(f"V (values, {len(v)}×{V.shape[1]}):", V, [f"v{j + 1}" for j in range(len(v))])
    print(f"\n1. QKᵀ: one score per query (row) and key (column {', '.join(kn)}):")
    _show("", scores, qn)
    print(f"\n2. Scale by √d_k = √{d_k} = {_fmt(math.sqrt(d_k))} (keeps the scores' variance near 1):")
    _show("", scaled, qn)
    if mask is not None:
        print("\n3. Mask (1 = may attend, 0 = blocked; blocked scores become -inf):")
        _show("", mask.to(torch.int64), qn)
        shown = scaled.masked_fill(~mask, float("-inf"))
        _show("   masked scores:", shown, qn)
    else:
        print("\n3. Mask: none (every query may attend to every key).")
    print("\n4. Softmax over each row (the weights sum to 1; a fully blocked row gets 0):")
    _show("", weights, qn)
    print("\n5. Weighted sum of the values, softmax(...) V:")
    _show("", out, qn)
    return 0
