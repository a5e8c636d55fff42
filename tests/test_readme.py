"""The README's ten lines of Python run and give the shapes their comments promise."""
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs_with_the_shapes_it_states():
    text = README.read_text()
    start = text.index("```python") + len("```python")
    code = text[start:text.index("```", start)]
    scope: dict = {}
    exec(compile(code, str(README), "exec"), scope)
    assert tuple(scope["o"].shape) == (2, 5, 32)
    assert tuple(scope["attention"].shape) == (2, 4, 5, 5)
    assert tuple(scope["h"].shape) == (2, 5, 32)
    assert [tuple(m.shape) for m in scope["maps"]] == [(2, 4, 5, 5)] * 2
    # padded keys of the second sequence get no attention in any layer
    assert all(float(m[1, :, :, 3:].abs().max()) == 0.0 for m in scope["maps"])
