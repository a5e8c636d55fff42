"""``--stop`` reads ``\\uXXXX`` (the escape ``--input-file``'s output writes a line separator
with), and its refusal of another escape names that one too, as ``--help`` does: a user who
copies ``\\u2028`` from the output learns that it is read."""
import pytest

from attnlab.cli import main
from attnlab.commands.generate import escape, unescape
from attnlab.errors import UsageError


def test_refusal_lists_every_escape_that_is_read():
    with pytest.raises(UsageError) as refused:
        unescape(r"\q")
    message = str(refused.value)
    for named in (r"\n", r"\t", r"\r", r"\\", r"\uXXXX"):
        assert named in message
    assert unescape(r"\u2028") == "\u2028" == unescape(escape("\u2028"))


def test_help_names_the_unicode_escape(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    assert r"\uXXXX" in capsys.readouterr().out
