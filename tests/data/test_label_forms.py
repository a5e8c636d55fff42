"""Labels that differ only in Unicode form ("café" composed on Windows, decomposed on a Mac)
would be two classes (or tags, or sets) that print alike: refused where they enter, naming
the file, the column and both places, before a run directory is written."""
import json

import pytest

from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.tasks.classify.data import check_labels
from attnlab.tasks.tag.data import check_tags, read_sentences

NFC, NFD = "caf\u00e9", "cafe\u0301"


@pytest.mark.parametrize("task, header, label", [("classify", "text,label", "{}"),
                                                 ("classify", "text,label", "tea|{}")])
def test_classify_refuses_a_label_in_two_forms_before_the_run(tmp_path, capsys, task, header,
                                                             label):
    multi = "|" in label
    rows = [f"row {i},{label.format(NFC if i % 2 else 'tea')}" for i in range(8)]
    rows.append(f"last,{label.format(NFD)}")
    data = tmp_path / "d.csv"
    data.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    flags = ["--multi-label"] if multi else []
    assert main(["train", task, "--data", str(data), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists()
    assert f"d.csv: column 'label': '{NFC}' (line 3, NFC) and '{NFD}' (line 10, NFD) print alike" in err


def test_compatibility_forms_are_other_labels():
    # "ﬁ" (a ligature) and a full-width A print differently from "fi" and "A": not refused
    from attnlab.data.label_forms import OneSpelling

    forms = OneSpelling("--data d.csv", "column 'label'")
    for i, label in enumerate(["fi", "\ufb01", "A", "\uff21", NFC, NFC]):
        forms.see(label, lambda: f"line {i + 2}")


def test_tag_refuses_a_tag_in_two_forms(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"tokens": ["a"], "tags": [f"B-{NFC}"]}) + "\n"
                    + json.dumps({"tokens": ["b"], "tags": [f"B-{NFD}"]}) + "\n")
    with pytest.raises(UsageError, match=r"d.jsonl: the tags: ") as e:
        read_sentences(path)
    assert "(the sentence at line 1, NFC) and" in str(e.value)
    assert "the sentence at line 2, NFD)" in str(e.value)


def test_set_ids_in_two_forms_are_not_two_sets(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(f"set,label,x\n{NFC},a,1\n{NFD},a,2\nb,c,3\n", encoding="utf-8")
    from attnlab.data.feature_sets import read_feature_sets

    with pytest.raises(UsageError, match=r"column 'set': .*\(line 2, NFC\) and .*\(line 3, NFD\)"):
        read_feature_sets(path, set_column="set", label_column="label")


def test_a_held_out_label_in_the_other_form_says_so(tmp_path):
    with pytest.raises(UsageError, match=f"label '{NFD}' never seen in training .*training has "
                                         f"'{NFC}' \\(NFC\\), which prints alike \\(this one: NFD\\)"):
        check_labels([("x", NFD)], [2], tmp_path / "t.csv", {NFC, "tea"}, "test")
    found = read_sentences(_conll(tmp_path, f"B-{NFD}"))
    with pytest.raises(UsageError, match=f"training has 'B-{NFC}' \\(NFC\\), which prints "
                                         f"alike \\(this one: NFD\\)"):
        check_tags(found, {f"B-{NFC}", "O"}, "data")


def _conll(tmp_path, tag):
    path = tmp_path / "t.conll"
    path.write_text(f"Paris {tag}\nis O\n", encoding="utf-8")
    return path


def test_a_class_weight_for_a_class_in_the_other_form_says_so(tmp_path):
    from attnlab.tasks.classify.labels import resolve_class_weights

    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({NFD: 2.0, "tea": 1.0}))
    with pytest.raises(UsageError, match=f"training has '{NFC}' \\(NFC\\), which prints "
                                         f"alike \\(this one: NFD\\)"):
        resolve_class_weights(str(weights), [NFC, "tea"], [NFC, "tea"])


def test_a_no_break_space_where_the_other_has_a_space_is_refused():
    """French typography puts a no-break space before "!"; pasted labels mix the two."""
    from attnlab.data.label_forms import OneSpelling

    forms = OneSpelling("--data d.csv", "column 'label'")
    forms.see("Oui !", lambda: "line 2")
    with pytest.raises(UsageError, match=r"'Oui !' \(line 2, with a space\) and 'Oui\\xa0!' "
                                         r"\(line 4, with a no-break space\) print alike"):
        forms.see("Oui\u00a0!", lambda: "line 4")
