"""What a task can do is declared on its ``Task`` (``capabilities``: ``quantizable``,
``int8_faster_from``, ``hf_auto_class``, ...; ``init_model_types``) and read by the commands from
the task object: a new task is one package plus one registry line, and takes part in
``--quantize``, ``export`` and ``--init`` by setting those declarations, with no command edited.
The rule is kept by a scan of the commands' source for a task's name compared with a literal."""
import ast
from pathlib import Path

import pytest

from attnlab.errors import UsageError
from attnlab.tasks import TASKS, Capabilities, Task, get_task
from attnlab.tasks.base import line_of

PACKAGE = Path(__file__).resolve().parents[1] / "attnlab"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "configs"
# where a command decides by task: it must ask the task object, never compare names
SCANNED = [*sorted((PACKAGE / "commands").glob("*.py")), PACKAGE / "loading.py",
           PACKAGE / "interop" / "source.py"]


def _literal_names(node: ast.AST) -> set[str]:
    """The registered task names a literal spells: a string, or a tuple, list, set or dict
    (its keys) of strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(TASKS)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_literal_names(e) for e in node.elts))
    if isinstance(node, ast.Dict):
        return set().union(*(_literal_names(k) for k in node.keys if k is not None))
    return set()


def task_name_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, names) of each comparison (``==``, ``!=``, ``in``, ``not in``) of a value with a
    literal that spells a registered task name, directly or through a module-level name bound
    to such a literal (``QUANTIZE_TASKS = ("lm", "translate")``), of each ``.get`` or
    subscript of such a dict (``{"lm": 256}.get(task)``), and of each ``tasks=`` given such a
    literal (``check_run_dir(..., tasks=("translate",))``)."""
    tree = ast.parse(source)
    bound = {}  # module-level name -> the task names its literal spells
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and _literal_names(node.value):
                    bound[target.id] = _literal_names(node.value)

    def names_of(node):
        if isinstance(node, ast.Name) and node.id in bound:
            return bound[node.id]
        return _literal_names(node)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            names = set().union(*(names_of(x) for x in (node.left, *node.comparators)))
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Store):
            names = names_of(node.value) if isinstance(node.value, (ast.Name, ast.Dict)) else set()
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get"):
            names = names_of(node.func.value)
        elif isinstance(node, ast.Call):  # check_run_dir(..., tasks=("lm",))
            names = set().union(*(names_of(k.value) for k in node.keywords if k.arg == "tasks"))
        else:
            continue
        if names:
            found.append((node.lineno, ", ".join(sorted(names))))
    return found


@pytest.mark.parametrize("source", [
    'if cfg.task == "translate": pass',
    'generative = cfg.task in ("translate", "lm")',
    'if task.name != "classify": pass',
    'QUANTIZE_TASKS = ("lm", "translate")\ndef f(task):\n    return task in QUANTIZE_TASKS',
    'FASTER = {"lm": 256, "translate": 384}\ndef f(task):\n    return FASTER.get(task)',
    'def f(cfg):\n    return {"lm": "AutoModelForCausalLM"}.get(cfg.task, "x")',
    'SUPPORTED = {"lm": ("gpt2",)}\ndef f(task):\n    return SUPPORTED[task]',
    'run_dir, cfg = check_run_dir(path, tasks=("translate",))',
])
def test_the_scan_finds_each_way_of_deciding_by_a_task_name(source):
    assert task_name_comparisons(source), source


def test_the_scan_lets_other_literals_and_declarations_through():
    source = ('if args.by_length and not task.capabilities.evaluate_by_length: pass\n'
              'if name == "cosine": pass\n'
              'x = {"int8": 1}.get(kind)\n')
    assert task_name_comparisons(source) == []


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_command_decides_by_comparing_a_task_name(path):
    """What a task can do is its ``Task``'s declaration
    (``get_task(cfg.task).capabilities.quantizable``),
    so a new task needs no command edited; a comparison with a task's name here is a list of
    tasks kept outside the task packages."""
    found = task_name_comparisons(path.read_text())
    assert found == [], (f"{path.name} compares a task with the names of registered tasks "
                         f"(line, names): {found}; declare it on Task and read the task object")


# ---- the declarations, as the commands read them -------------------------------------------
class ToyTask(Task):
    """A task added the way docs/architecture.md says: declarations only, no command edited."""

    name = "toy"
    capabilities = Capabilities(quantizable=True, int8_faster_from=64, int8_one_at_a_time=True,
                                hf_auto_class="AutoModelForCausalLM")
    init_model_types = ("gpt2",)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(TASKS, "toy", ToyTask())
    return TASKS["toy"]


def test_a_new_task_takes_part_in_quantize_export_and_init_by_its_declarations(toy, tmp_path):
    from attnlab.commands.export import export_tasks
    from attnlab.commands.quantize import int8_slower
    from attnlab.loading import quantize_refusal

    assert quantize_refusal("int8", "toy", "runs/t") is None
    assert quantize_refusal("int8", "sort", "runs/s") == \
        "is for toy, lm and translate runs; runs/s is a sort run"
    assert "this model is 32 wide, and int8 decoding was faster only from 64 wide" in \
        int8_slower("toy", 32)
    assert int8_slower("toy", 64) is None
    assert "it translates the 3 texts one at a time" in int8_slower("toy", 64, texts=3)
    assert "toy" in export_tasks()
    d = tmp_path / "gpt"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "gpt2"}')
    (d / "model.safetensors").write_bytes(b"w")
    (d / "tokenizer.json").write_text("{}")
    assert toy.init_source(d).model_type == "gpt2"


def test_a_task_that_declares_nothing_is_refused_naming_the_tasks_that_do(tmp_path):
    from attnlab.commands.export import export_tasks
    from attnlab.loading import quantize_refusal, quantize_tasks

    # the lists in the messages come from the declarations, as the messages always read
    assert quantize_tasks() == ("lm", "translate")
    assert export_tasks() == ("lm", "translate", "tag", "classify")
    assert quantize_refusal("int8", "sort", "runs/s") == \
        "is for lm and translate runs; runs/s is a sort run"
    d = tmp_path / "gpt"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(UsageError) as e:
        get_task("reverse").init_source(d)
    assert str(e.value) == (f"--init {d}: attnlab train reverse starts from attnlab reverse "
                            f"runs only, not from Hugging Face directories (model_type 'gpt2')")


@pytest.mark.parametrize("name, quantizable, generates, init_model_types", [
    ("lm", True, True, ("gpt2", "llama", "qwen2", "qwen3", "mistral")),
    ("translate", True, True, ("marian",)),
    ("classify", False, False, ("bert", "roberta", "xlm-roberta", "camembert", "distilbert")),
    ("reverse", False, False, ()),
    ("graph", False, False, ()),
])
def test_each_task_declares_what_it_takes_part_in(name, quantizable, generates,
                                                  init_model_types):
    task = get_task(name)
    assert (task.capabilities.quantizable, task.capabilities.generates,
            task.init_model_types) == (quantizable, generates, init_model_types)
    exports = task.capabilities.hf_auto_class is not None
    assert exports == hasattr(task.runtime(), "export_hf")


# ---- one frozen declaration, read by the commands; the runtime called directly ---------------
# the Capabilities fields that promise a function of the task's runtime.py of the same name
RUNTIME_FUNCTIONS = ("translate", "encode_prompt", "evaluate_by_length", "attention_figure",
                     "attention_layers", "attention_focus")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_tasks_capabilities_are_one_frozen_declaration_its_runtime_keeps(name):
    """A task's capabilities are one frozen ``Capabilities`` (a command cannot change what a
    task can do for the next one), and each optional command it declares is a function of its
    runtime, which a command calls; one it does not declare is none (a command would refuse
    it while the runtime could serve it, or call what is not there)."""
    import dataclasses

    task = get_task(name)
    assert type(task.capabilities) is Capabilities
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.capabilities.quantizable = True
    runtime = task.runtime()
    for function in RUNTIME_FUNCTIONS:
        defined = callable(getattr(runtime, function, None))
        assert getattr(task.capabilities, function) == defined, (name, function)
    exports = task.capabilities.hf_auto_class is not None
    assert exports == callable(getattr(runtime, "export_hf", None)), name


def test_task_is_narrow_and_holds_no_capability_or_forwarding_method():
    """``Task`` declares what a task is (its settings, model config, defaults and checks), one
    ``capabilities`` and one ``runtime()``; the commands call the runtime's functions
    themselves, so no method of ``Task`` forwards to them. Before: 26 attributes and 25
    methods (each capability flag and optional command one by one; run, load, predict,
    predict_many, evaluate and attention_maps forwarding to ``runtime_module()``). Since
    then one more: ``val_metrics_off``, which declares what a run's validation leaves out
    (what the task is, not what it forwards)."""
    import inspect

    attributes = list(Task.__annotations__)
    methods = [n for n, v in vars(Task).items() if inspect.isfunction(v)]
    assert len(attributes) <= 10 and len(methods) <= 20, (attributes, methods)
    gone = {"quantizable", "generates", "hf_auto_class", "attention_kind", "translate",
            "encode_prompt", "export_hf", "runtime_module", "run", "load", "predict",
            "predict_many", "evaluate", "attention_maps"}
    assert gone.isdisjoint(dir(Task)), gone & set(dir(Task))


def _lm_run_dir(tmp_path):
    """A directory ``check_run_dir`` takes as an lm run (its config.yaml as an lm run writes
    it; the weights are never read: the refusals below come first)."""
    (tmp_path / "config.yaml").write_text((FIXTURES / "lm.yaml").read_text())
    (tmp_path / "model.safetensors").write_bytes(b"")
    return tmp_path


def test_the_commands_refuse_what_a_task_does_not_declare(toy, tmp_path, monkeypatch, capsys):
    """The commands follow the declarations, not the tasks' names: with lm declared without
    ``quantizable`` and ``encode_prompt`` and the toy task declaring them, ``evaluate --quantize
    int8``, ``predict --max-new-tokens`` and ``generate`` refuse an lm run, naming the option
    and the tasks that declare it, before any weight is read."""
    import dataclasses

    from attnlab.cli import main

    run = _lm_run_dir(tmp_path)
    lm = get_task("lm")
    monkeypatch.setattr(lm, "capabilities", dataclasses.replace(
        lm.capabilities, quantizable=False, encode_prompt=False))
    monkeypatch.setattr(toy, "capabilities", dataclasses.replace(
        toy.capabilities, encode_prompt=True))
    assert main(["evaluate", str(run), "--quantize", "int8"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --quantize is for toy and translate "
                                       f"runs; {run} is a lm run\n")
    assert main(["predict", str(run), "--input", "ab", "--max-new-tokens", "3"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --max-new-tokens is for toy runs; "
                                       f"{run} is a lm run\n")
    assert main(["generate", str(run), "--prompt", "ab"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: generate: {run} holds a 'lm' run; "
                                       f"this command needs one of: toy\n")


# ---- graph's build_model(cfg) ---------------------------------------------------------------
@pytest.mark.slow
def test_a_graph_run_made_before_loads_through_build_model_of_its_config(tmp_path):
    """graph's ``build_model(cfg)`` reads the features' width and the classes the run derived,
    as every other task's does; a run written before (its config.yaml as such a run wrote it)
    still loads and predicts one of its two classes."""
    import torch

    import attnlab
    from attnlab.runs import read_yaml, save_weights
    from attnlab.tasks.graph.runtime import build_model

    (tmp_path / "config.yaml").write_text((FIXTURES / "graph-gat.yaml").read_text())
    cfg = get_task("graph").read_config(read_yaml(tmp_path / "config.yaml"),
                                        tmp_path / "config.yaml")
    model = build_model(cfg)
    save_weights(model, tmp_path / "model.safetensors")
    loaded = attnlab.load(tmp_path)
    x = torch.zeros(34, cfg.in_dim)  # (N, F): the karate club's 34 one-hot members
    assert loaded(x, torch.eye(34, dtype=torch.bool)).shape == (34, len(cfg.classes))
    task = get_task("graph")
    found = task.runtime().predict_many(task, tmp_path, cfg, ["0"], ["--input"])
    assert line_of(found[0]) in ("Mr. Hi", "Officer")


def test_every_task_package_is_in_the_registry():
    """A package in ``attnlab/tasks/`` that the registry's line leaves out would be a task no
    command finds: each package's ``TASKS`` are the registry's, under the same names."""
    import importlib

    packages = sorted(d.name for d in (PACKAGE / "tasks").iterdir()
                      if (d / "__init__.py").is_file())
    assert packages, "no task packages found"
    for name in packages:
        own = importlib.import_module(f"attnlab.tasks.{name}").TASKS
        assert own and all(TASKS.get(k) is task for k, task in own.items()), name
    assert len(TASKS) == sum(len(importlib.import_module(f"attnlab.tasks.{n}").TASKS)
                             for n in packages)
