"""A run's ``logs/metrics.csv`` edited by hand and saved as UTF-16 or Latin-1 ended
``--resume`` (and ``CSVLog.begin``) in a ``UnicodeDecodeError`` traceback; it is refused in
one line naming the file, and a log with old Mac line ends is read as before."""
import pytest

from attnlab.errors import UsageError
from attnlab.training.csvlog import CSVLog, check_steps

ROWS = "step,train_seconds,train_loss\n1,0.1,2.0\n2,0.2,1.9 café\n"


@pytest.mark.parametrize("encoded, message", [
    (ROWS.encode("utf-16"), "the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                            "save it as UTF-8"),
    (ROWS.encode("latin-1"), " line 3: not valid UTF-8 (byte 0xe9 at column 14); save the "
                             "file as UTF-8"),
], ids=["utf-16", "latin-1"])
def test_a_log_not_in_utf8_is_refused_naming_it(tmp_path, encoded, message):
    log = tmp_path / "logs" / "metrics.csv"
    log.parent.mkdir()
    log.write_bytes(encoded)
    with pytest.raises(UsageError) as check:
        check_steps(log.parent)
    with pytest.raises(UsageError) as begin:
        CSVLog(log).begin(1)
    assert str(check.value) == str(begin.value)
    assert str(check.value).startswith(f"--resume: {log}") and message in str(check.value)
    assert log.read_bytes() == encoded


def test_a_log_with_carriage_return_line_ends_keeps_its_rows(tmp_path):
    log = tmp_path / "metrics.csv"
    log.write_bytes(ROWS.replace("\n", "\r").encode())
    CSVLog(log).begin(1)
    assert log.read_text().splitlines() == ["step,train_seconds,train_loss", "1,0.1,2.0"]
