"""What the docs and notebooks say about attnlab, checked against attnlab itself (issue 37):
a table of choices lists every registered choice, the commands' lists name every task that
has the feature, a notebook's stated time agrees with the output it shows."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from attnlab.commands.export import export_tasks
from attnlab.models.configs import CausalLMConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _row(page: str, flag: str) -> str:
    """The table row of ``page`` that documents ``flag``."""
    rows = [line for line in (DOCS / page).read_text().splitlines()
            if line.startswith(f"| `{flag}")]
    assert len(rows) == 1, (page, flag, rows)
    return rows[0]


def test_language_model_table_lists_every_positional_kind():
    row = _row("language_model.md", "--positional")
    listed = set(re.findall(r"`([a-z]+)`", row.split("|")[3]))
    field = next(f for f in dataclasses.fields(CausalLMConfig) if f.name == "positional")
    assert listed == set(field.metadata["choices"]), row  # the registry's kinds


def _export_sections() -> dict[str, str]:
    cli = (DOCS / "cli.md").read_text()
    line = next(x for x in cli.splitlines() if x.startswith("attnlab export DIR --hf OUT"))
    interop = (DOCS / "interop.md").read_text()
    exporting = interop.split("## Exporting", 1)[1].split("\n## ", 1)[0]
    return {"cli.md": line, "interop.md": exporting}


def test_the_export_docs_name_every_task_that_exports():
    for page, text in _export_sections().items():
        for task in export_tasks():
            assert re.search(rf"\b{task}\b", text), (page, task)


def _notebook(name: str) -> list[dict]:
    path = next((ROOT / "examples").glob(f"{name}_*.ipynb"))
    return json.loads(path.read_text())["cells"]


_SPOKEN = {"a minute": 60, "a minute and a half": 90, "two minutes": 120,
           "three minutes": 180, "five minutes": 300}


def test_notebook_04_says_the_training_time_its_output_shows():
    cells = _notebook("04")
    intro = "".join(cells[0]["source"]).replace("\n", " ")
    said = re.search(r"train for about (.+?) on one CPU core", intro)
    assert said and said.group(1) in _SPOKEN, intro
    shown = [float(m) for c in cells if c["cell_type"] == "code"
             for o in c.get("outputs", []) for m in re.findall(r"wall time: ([\d.]+) s",
                                                               "".join(o.get("text", "")))]
    assert len(shown) == 1
    assert 2 / 3 <= _SPOKEN[said.group(1)] / shown[0] <= 3 / 2, (said.group(1), shown)


def test_no_notebook_credits_lightning_with_attnlabs_csv_log():
    for path in (ROOT / "examples").glob("[0-9][0-9]_*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"]).replace("\n", " ")
                assert "Lightning's CSV" not in text, path.name


def _train_lm_parser():
    from attnlab.cli import build_parser

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    return train._subparsers._group_actions[0].choices["lm"]


def test_the_llama_page_names_flags_and_values_train_lm_takes():
    parser = _train_lm_parser()
    text = (DOCS / "llama_family.md").read_text()
    spans = [s.split() for s in re.findall(r"`(--[^`]+)`", text)]
    assert len(spans) > 15
    for words in spans:
        for flag, value in zip(words, words[1:] + [""]):
            if not flag.startswith("--"):
                continue
            action = parser._option_string_actions.get(flag)
            assert action is not None, f"llama_family.md names {flag}, not a flag of train lm"
            if action.choices and value and not value.startswith("--"):
                assert set(value.split("|")) <= set(action.choices), (flag, value)


def test_the_llama_page_says_what_arch_llama_sets():
    from attnlab.models.configs import ARCH_PARTS

    text = (DOCS / "llama_family.md").read_text().replace("\n", " ")
    said = re.search(r"`--arch llama` sets four parts at once: `([^`]+)`", text).group(1)
    parts = dict(re.findall(r"--(positional|norm|ff) (\w+)", said), bias="--no-bias" not in said)
    assert parts == ARCH_PARTS["llama"]


def test_notebook_08_trains_on_notebook_04s_text():
    def prepared(name: str) -> list[str]:
        return [line for c in _notebook(name) if c["cell_type"] == "code"
                for o in c.get("outputs", []) for line in "".join(o.get("text", "")).splitlines()
                if line.startswith("prepared data/pyref:")]

    assert len(prepared("08")) == 1 and prepared("08") == prepared("04")


def _flags(parser, path: str = "attnlab"):
    """(command, flag) for every long flag of ``parser`` and of its sub-commands, one per
    option (``--keep-best``, not its ``--no-keep-best`` twin)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, f"{path} {name}")
        elif action.option_strings and action.option_strings[0].startswith("--"):
            yield path, action.option_strings[0]


def test_every_flag_of_every_command_is_named_in_the_docs():
    """What `--help` offers, a page explains: no flag is known only from its help line."""
    from attnlab.cli import build_parser

    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    flags = set(_flags(build_parser())) - {("attnlab", "--version")}
    assert len(flags) > 300
    missing = sorted(f"{command} {flag}" for command, flag in flags
                     if flag != "--help" and not re.search(rf"{re.escape(flag)}(?![\w-])", text))
    assert not missing, "flags no page of docs/ names:\n" + "\n".join(missing)


def test_the_explorer_screenshots_caption_names_the_row_as_the_page_labels_it():
    """The reversal screenshot's caption called query 4 "5" (the input's token 4), while the
    page, as the screenshot shows, labels a row with the output it predicts: "8"."""
    page = (DOCS / "attention_explorer.md").read_text()
    tokens = re.search(r'attnlab view runs/reverse --input "([^"]+)"', page).group(1).split()
    caption = re.search(r"!\[The explorer on a trained reversal run: (.*?)\]", page).group(1)
    found = re.search(r'query (\d+) \(its output, "(\S+)"\) attends to key (\d+) \("(\S+)"\)',
                      caption)
    assert found, caption
    query, output, key, token = int(found[1]), found[2], int(found[3]), found[4]
    T = len(tokens)
    assert key == T - 1 - query and token == tokens[key]  # its mirror image
    assert output == tokens[T - 1 - query]  # row i outputs the reversal's token i
