"""One table of the Hugging Face model types each task starts from (``--init DIR``): the
task's own declaration (``Task.init_model_types``) and the converters' (``read_checkpoint``'s
``SUPPORTED``) are the same rows of ``attnlab.interop.source.INIT_MODEL_TYPES``."""
from collections import Counter

from attnlab.interop.source import INIT_MODEL_TYPES
from attnlab.tasks import TASKS


def test_each_task_reads_its_row_of_the_one_table():
    declared = {name: task.init_model_types for name, task in TASKS.items()
                if task.init_model_types}
    assert declared == INIT_MODEL_TYPES
    assert all(TASKS[name].init_model_types is row for name, row in INIT_MODEL_TYPES.items())


def test_the_converters_read_the_same_table():
    from attnlab.interop.checkpoint import SUPPORTED

    assert SUPPORTED is INIT_MODEL_TYPES


def test_no_model_type_is_listed_twice():
    """Within a row no type twice; across rows a type only where two tasks share one row
    (classify and tag read the BERT family the same way: one tuple, ``BERT_FAMILY``)."""
    rows = list({id(row): row for row in INIT_MODEL_TYPES.values()}.values())
    counts = Counter(t for row in rows for t in row)
    assert [t for t, n in counts.items() if n > 1] == []
    assert all(row and all(isinstance(t, str) and t for t in row)
               for row in INIT_MODEL_TYPES.values())
