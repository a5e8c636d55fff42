"""Every example in README.md and docs/*.md runs and prints what the page says it prints.

The convention (also stated for writers in docs/index.md, "Every example is tested"):

- A ```` ```console ```` block is a terminal session. Each line starting with ``$ `` is a
  command (a line ending in ``\\`` continues on the next); the lines after it, up to the next
  ``$ ``, are what it prints on stdout. A command must exit with status 0, unless its output
  ends with a line ``[N]`` (as in cram): then it must exit with N, and the text is compared with
  its stdout followed by its stderr (where errors go). Progress and warnings on stderr of a
  successful command are not compared.
- A ```` ```python ```` block is executed; if a ```` ```text ```` block follows it (only blank
  lines between), that is its exact stdout.
- In any expected output, ``...`` matches any text (doctest's ELLIPSIS); a line that is only
  ``...`` matches any number of lines, none included. Use it for numbers that depend on
  training or timing. Two or more spaces match any run of spaces (column alignment); trailing
  spaces and leading/trailing blank lines are ignored.
- A block whose info string has ``file=NAME`` (```` ```csv file=reviews.csv ````) is written to
  NAME: example data for the commands after it.
- The blocks of one page run in order, in one fresh temporary working directory and one Python
  namespace, so a page can train a small run and then predict, evaluate or load it.
- A console block's ``test-sizes=--FLAG:N[,--FLAG:N]``
  (```` ```console test-sizes=--max-steps:6 ````) runs its commands here with ``--FLAG N`` in
  place of the value the page shows, which stays what a reader types: for a run whose output
  the page leaves to ``...`` and that no later example reads, so that the smaller run proves
  what the page says as the full one does. Each flag must be in the block, a command's
  expected output must not show the value replaced, and a command must not warn at its test
  sizes (a --warmup longer than the smaller --max-steps) where the page shows no warning.
- Not run: ``slow`` after the language (```` ```console slow ````) runs only with
  ``ATTNLAB_SLOW_DOCS=1``; ``norun`` never runs (a checkpoint we cannot ship, a GPU cluster).
  The page should say so in its prose. Any other block that looks like a shell or Python example
  (a fenced ``sh``/``bash``/``shell``/unlabelled block with a command in it, a ```` ```text ````
  or indented block with ``$ `` lines or with a command that has no placeholder) fails
  ``test_every_example_is_run_or_marked``. Command *syntax* goes in a ```` ```text ```` (or
  indented) block and shows its placeholders (``DIR``, ``FILE``, ``[--flag N]``, ``a|b``,
  ``...``).

Commands run through bash with the virtualenv's ``bin`` first on PATH, so ``attnlab`` is the
working tree's. Before it on PATH, an ``attnlab`` that runs the command in a process forked from
a server that has imported torch and Lightning once (tests/forkserver.py): each command still
runs in a process of its own, with its own directory, environment, streams and exit status,
without the 4-16 s of CPU a fresh process spends importing, which was most of these tests' cost.
``test_the_fork_server_runs_a_command_as_its_own_process`` checks that it does.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SLOW = os.environ.get("ATTNLAB_SLOW_DOCS") == "1"
COMMAND_TIMEOUT = 600  # seconds; a docs example should take a small fraction of this
SLOW_TIMEOUT = 3600    # a `slow` block is a full-size run (minutes), on a possibly busy machine

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*(.*)$")   # up to 3 spaces: inside a list item
SHELL_LANGS = {"sh", "bash", "shell", "zsh", "shell-session", "sh-session", "pycon"}
# What a command or a piece of Python looks like at the start of a line.
COMMAND = re.compile(r"^(\$ |attnlab |make |python3? |pip |torchrun |srun |sbatch |export \w+=|"
                     r"import \w|from [\w.]+ import )")
# Placeholders that make a command syntax rather than an example.
PLACEHOLDER = re.compile(r"\[|\||\.\.\.|<|\b[A-Z][A-Z0-9_]*\b")


@dataclass
class Block:
    page: Path
    line: int                 # 1-based line of the opening fence (or first indented line)
    lang: str
    flags: set[str]
    attrs: dict[str, str]
    body: str
    fenced: bool = True
    output: "Block | None" = None      # a python block's ```text output
    is_output: bool = False

    @property
    def where(self) -> str:
        name = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{name}:{self.line}"


def parse(page: Path) -> list[Block]:
    """The page's code blocks in order: fenced ones, and indented (4-space) ones."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    blank_before = True
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):  # else inline code (CommonMark)
            indent, fence, info = len(m.group(1)), m.group(2), m.group(3).split()
            j = i + 1
            while j < len(lines) and not lines[j].lstrip(" ").startswith(fence):
                j += 1
            if j == len(lines):
                raise AssertionError(f"{page.name}:{i + 1}: unclosed code fence")
            lang = info[0] if info else ""
            flags = {w for w in info[1:] if "=" not in w}
            attrs = dict(w.split("=", 1) for w in info[1:] if "=" in w)
            body = "\n".join(l[indent:] if l[:indent].isspace() else l for l in lines[i + 1:j])
            blocks.append(Block(page, i + 1, lang, flags, attrs, body + "\n"))
            i, blank_before = j + 1, False
            continue
        if blank_before and lines[i].startswith("    ") and lines[i].strip():
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            body = "\n".join(l[4:] for l in lines[i:j]).strip("\n") + "\n"
            blocks.append(Block(page, i + 1, "", set(), {}, body, fenced=False))
            i, blank_before = j, True
            continue
        blank_before = not lines[i].strip()
        i += 1
    # A python block's output is the ```text block right after it (blank lines between only).
    text = page.read_text(encoding="utf-8").splitlines()
    for a, b in zip(blocks, blocks[1:]):
        if a.lang == "python" and b.lang == "text" and b.fenced:
            after_a = a.line + a.body.count("\n") + 1   # 1-based: the line after a's closing fence
            if all(not l.strip() for l in text[after_a:b.line - 1]):
                a.output, b.is_output = b, True
    return blocks


# ---- comparing output -------------------------------------------------------------------------
def normalise(text: str) -> str:
    return "\n".join(l.rstrip() for l in text.strip("\n").splitlines()).strip("\n")


def _literal(text: str) -> str:
    # Two or more spaces are column alignment: any run of spaces matches them, so a table whose
    # columns widen does not fail every page that shows it. A single space must be one space.
    return r" +".join(re.escape(part) for part in re.split(r"  +", text))


def matches(expected: str, actual: str) -> bool:
    """``actual`` fits ``expected``, where ``...`` stands for any text (a line of its own: any
    number of lines) and two or more spaces for any run of spaces."""
    pattern = ""
    for line in normalise(expected).splitlines():
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += "(?s:.*?)".join(map(_literal, line.split("..."))) + r"\n"
    return re.fullmatch(pattern, normalise(actual) + "\n" if normalise(actual) else "") is not None


@dataclass
class Command:
    line: int
    text: str
    expected: list[str] = field(default_factory=list)


def commands(block: Block) -> list[Command]:
    """The ``$ `` commands of a console block, each with its expected output lines."""
    found: list[Command] = []
    continued = False
    for n, line in enumerate(block.body.splitlines(), start=block.line + 1):
        if continued:
            found[-1].text += "\n" + line
        elif line.startswith("$ "):
            found.append(Command(n, line[2:]))
        elif found:
            found[-1].expected.append(line)
        elif line.strip():
            raise AssertionError(f"{block.page.name}:{n}: a console block starts with "
                                 f"{line!r}, not with a '$ ' command")
        continued = line.endswith("\\")
    return found


def run_command(cmd: Command, cwd: Path, where: str, timeout: float = COMMAND_TIMEOUT,
                forks: Path | None = None, sized: bool = False) -> None:
    """Runs ``cmd`` in bash in ``cwd`` and checks its output and exit status; ``forks``: the
    directory of the fork server's ``attnlab`` (put first on PATH), or None for the real one.
    ``sized``: the command runs at its block's test sizes, which must not make it warn (a
    --warmup longer than the smaller --max-steps) where the page shows no warning."""
    expected = list(cmd.expected)
    while expected and not expected[-1].strip():
        expected.pop()
    status = 0
    if expected and re.fullmatch(r"\[(\d+)\]", expected[-1].strip()):
        status = int(expected.pop().strip()[1:-1])
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATTNLAB_RUN_DIR", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if forks is not None:
        env["PATH"] = f"{forks}{os.pathsep}{env['PATH']}"
    env["MPLBACKEND"] = "Agg"
    done = subprocess.run(["bash", "-c", cmd.text], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    printed = done.stdout + (done.stderr if status else "")
    assert done.returncode == status, (
        f"{where}: `{cmd.text}` exited with {done.returncode}, the page expects {status}\n"
        f"--- stdout\n{done.stdout}--- stderr\n{done.stderr[-3000:]}")
    assert matches("\n".join(expected), printed), (
        f"{where}: `{cmd.text}` printed\n{printed}\n--- the page says\n" + "\n".join(expected))
    warned = [line for line in done.stderr.splitlines()
              if line.startswith("warning:") and line not in expected]
    assert not (sized and warned), (
        f"{where}: at its test sizes `{cmd.text}` warns, which the page does not show: "
        f"{warned[0] if warned else ''}")


def declared_sizes(block: Block) -> dict[str, str]:
    """``{--FLAG: N}`` of the block's ``test-sizes=`` (empty without it)."""
    if "test-sizes" not in block.attrs:
        return {}
    parts = block.attrs["test-sizes"].split(",")
    sizes = dict(part.split(":", 1) for part in parts if ":" in part)
    if len(sizes) != len(parts) or not all(
            flag.startswith("--") for flag in sizes):
        raise AssertionError(f"{block.where}: test-sizes={block.attrs['test-sizes']}: give "
                             f"--FLAG:N[,--FLAG:N]")
    return sizes


def _flag_value(flag: str) -> re.Pattern:
    return re.compile(rf"(?<=\s){re.escape(flag)}(\s+|=)([^\s\\]+)")


def at_test_sizes(block: Block, cmd: Command) -> Command:
    """``cmd`` with the values of the block's ``test-sizes`` flags replaced."""
    text = cmd.text
    for flag, value in declared_sizes(block).items():
        text = _flag_value(flag).sub(lambda m: f"{flag}{m[1]}{value}", text)
    return Command(cmd.line, text, cmd.expected)


def size_problems(block: Block) -> list[str]:
    """A ``test-sizes`` flag the block never sets, or whose value its output shows."""
    try:
        sizes = declared_sizes(block)
    except AssertionError as e:
        return [str(e)]
    problems = []
    for flag in sizes:
        found = [(cmd, m[2]) for cmd in commands(block)
                 for m in _flag_value(flag).finditer(cmd.text)]
        if not found:
            problems.append(f"{block.where}: test-sizes names {flag}, which no command sets")
        for cmd, shown in found:
            if re.search(rf"(?<![\w.]){re.escape(shown)}(?![\w.])", "\n".join(cmd.expected)):
                problems.append(f"{block.where}: the output of `{cmd.text.splitlines()[0]}` shows "
                                f"{shown}, the {flag} its test size replaces")
    return problems


def run_python(block: Block, scope: dict) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # blank lines first, so that a traceback names the line of the page
        exec(compile("\n" * block.line + block.body, str(block.page), "exec"), scope)
    if block.output is not None:
        assert matches(block.output.body, printed.getvalue()), (
            f"{block.where}: the snippet printed\n{printed.getvalue()}\n--- the page says\n"
            f"{block.output.body}")


def runnable(block: Block) -> bool:
    return block.fenced and block.lang in ("console", "python")


def skipped(block: Block) -> bool:
    return "norun" in block.flags or ("slow" in block.flags and not SLOW)


# ---- the tests --------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_print_what_the_page_says(page, tmp_path, monkeypatch, request):
    blocks = parse(page)
    todo = [b for b in blocks if (runnable(b) or "file" in b.attrs) and not skipped(b)]
    if not todo:
        pytest.skip(f"{page.name} has no example to run")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ATTNLAB_RUN_DIR", raising=False)
    runs_attnlab = any(re.search(r"(^|[\s;|&(`])attnlab\s", c.text)
                       for b in todo if b.lang == "console" for c in commands(b))
    bin_dir = request.getfixturevalue("forks") if runs_attnlab else None
    scope: dict = {"__name__": "__docs__"}
    for block in todo:
        if "file" in block.attrs:
            target = tmp_path / block.attrs["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.body, encoding="utf-8")
        if block.lang == "python":
            run_python(block, scope)
        elif block.lang == "console":
            for cmd in commands(block):
                sized = at_test_sizes(block, cmd)
                run_command(sized, tmp_path, f"{page.relative_to(ROOT)}:{cmd.line}",
                            SLOW_TIMEOUT if "slow" in block.flags else COMMAND_TIMEOUT, bin_dir,
                            sized=sized.text != cmd.text)


@pytest.mark.slow
def test_the_fork_server_runs_a_command_as_its_own_process(forks, tmp_path):
    """Through the fork server's ``attnlab`` a command prints, reads its standard input, works
    in the shell's directory and exits as the real ``attnlab`` process does."""
    run = ROOT / "tests" / "fixtures" / "reverse-trainer"
    script = (f"mkdir sub && cd sub && printf '3 4 5\\n1 2\\n' | attnlab predict {run} "
              f"--input-file - && attnlab plot lr --warmup 5 --max-iters 50 --out lr.png >/dev/null"
              f" && ls && attnlab plot lr --warmup -1")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               MPLBACKEND="Agg")
    done = {}
    for name, path in (("real", env["PATH"]), ("forked", f"{forks}{os.pathsep}{env['PATH']}")):
        (tmp_path / name).mkdir()
        done[name] = subprocess.run(["bash", "-c", script], cwd=tmp_path / name, text=True,
                                    env=dict(env, PATH=path), capture_output=True, timeout=300)
    real, forked = done["real"], done["forked"]
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert real.returncode == 2 and real.stdout.endswith("lr.png\n")
    assert real.stderr.startswith("attnlab: error: --warmup")
    assert len(real.stdout.splitlines()) == 3   # two predictions, then ls


# What a command may do on its way out, each ended by a plain interpreter and by the fork
# server's ending (tests/forkserver.py, which leaves out the teardown of modules).
ENDINGS = {
    "return": "print('done')",
    "exit status": "import sys; print('out'); sys.exit(3)",
    "exit message": "import sys; sys.exit('attnlab: error: bad')",
    "exception": "print('before'); raise ValueError('broken')",
    "interrupt": "raise KeyboardInterrupt",
    "unflushed output": "import sys; sys.stdout.write('no newline'); sys.stderr.write('err')",
    "atexit": "import atexit; atexit.register(print, 'at exit'); print('first')",
    "thread": "import threading, time\n"
              "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()",
    "local file": "def f(path):\n    out = open(path, 'w')\n    out.write('kept')\n"
                  "    raise SystemExit(4)\nf('written.txt')",
    "cycle": "class C:\n    def __del__(self):\n        open('del.txt', 'w').write('collected')\n"
             "def f():\n    c = C()\n    c.me = c\nf()",
}


@pytest.mark.slow
@pytest.mark.parametrize("ending", ENDINGS)
def test_the_fork_servers_ending_of_a_command_is_a_python_processs(ending, tmp_path):
    """``forkserver._exit_as_a_process_does``, which ends every forked command, run here in
    a process of its own (the forking itself is what every docs command goes through): exit
    status, printed error, traceback, death by SIGINT, flushed streams, atexit handlers,
    joined threads, a file left open in a frame and a cycle's ``__del__``, the same as a
    plain process."""
    from . import forkserver

    code = ENDINGS[ending]
    wrapped = (f"import sys; sys.path.insert(0, {str(Path(forkserver.__file__).parent)!r})\n"
               f"import forkserver\nforkserver._exit_as_a_process_does(lambda: exec({code!r}, {{}}))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # output buffered
    done = {}
    for name, program in (("plain", code), ("fork server's", wrapped)):
        (tmp_path / name).mkdir()
        done[name] = subprocess.run([sys.executable, "-c", program], cwd=tmp_path / name,
                                    env=env, capture_output=True, text=True, timeout=60)
        # a traceback's frames differ (the fork server's are in it): its other lines may not
        stderr = [l for l in done[name].stderr.splitlines() if not l.startswith(" ")]
        done[name] = (done[name].returncode, done[name].stdout, stderr,
                      sorted(p.read_text() for p in (tmp_path / name).iterdir()))
    assert done["fork server's"] == done["plain"]


def unmarked_examples(page: Path) -> list[str]:
    """Blocks that look like shell or Python examples but are neither run nor marked."""
    problems = []
    for b in parse(page):
        looks = [l for l in b.body.splitlines() if COMMAND.match(l.strip())]
        if b.lang in SHELL_LANGS or (b.fenced and b.lang == "" and looks):
            problems.append(f"{b.where}: a ```{b.lang} block is not run: use ```console with "
                            f"`$ ` commands (or mark it `norun`/`slow`)")
        elif not b.fenced or (b.lang == "text" and not b.is_output):
            kind = "an indented block" if not b.fenced else "a ```text block"
            for l in b.body.splitlines():
                s = l.strip()
                if s.startswith("$ "):
                    problems.append(f"{b.where}: {kind} with a `$ ` command: make it ```console")
                elif COMMAND.match(s) and not PLACEHOLDER.search(s.split(" #")[0]):
                    problems.append(f"{b.where}: {s!r} in {kind} is an example, not syntax (no "
                                    f"placeholder): make it a ```console example or mark it")
        elif b.lang == "console" and not commands(b):
            problems.append(f"{b.where}: a ```console block without a `$ ` command")
        elif (b.flags - {"slow", "norun"}) and b.lang in ("console", "python"):
            problems.append(f"{b.where}: unknown flag(s) {sorted(b.flags - {'slow', 'norun'})}")
        if b.lang == "console":
            problems += size_problems(b)
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_is_run_or_marked(page):
    assert unmarked_examples(page) == []


def test_index_links_every_page():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    missing = [p.name for p in (ROOT / "docs").glob("*.md")
               if p.name != "index.md" and f"({p.name})" not in index]
    assert missing == []


def test_ellipsis_matching():
    assert matches("a ... c", "a b c")
    assert matches("x\n...\ny", "x\ny")
    assert matches("x\n...\ny", "x\n1\n2\ny")
    assert matches("steps   ...", "steps   110")
    assert not matches("a ... c", "a b d")
    assert not matches("5 1 4 1 3", "5 1 4 1 3 0")
    assert not matches("5 1 4 1 3", "5 1  4 1 3")
    assert matches("  steps  60", "  steps          60")
    assert not matches("  steps  60", "  steps60")
    assert matches("", "")
    assert not matches("", "something")


def test_checker_flags_examples_that_nobody_runs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n    attnlab train reverse --out runs/x\n\n"
                    "```sh\nattnlab evaluate runs/x\n```\n\n"
                    "```text\n$ attnlab predict runs/x --input 1\n```\n\n"
                    "```\nattnlab plot pe\n```\n")
    assert len(unmarked_examples(page)) == 4
    page.write_text("    attnlab train TASK [--out DIR]\n\n```text\nattnlab predict DIR --input TEXT\n```\n\n"
                    "```console norun\n$ make run\n```\n\n```python slow\nimport torch\n```\n\n"
                    "```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
                    "    attnlab: error: --data: file not found: x.csv\n")
    assert unmarked_examples(page) == []


def test_a_command_must_print_what_the_page_says_and_exit_as_it_says(tmp_path):
    run_command(Command(1, "echo 5 1 4 1 3", ["5 1 4 1 3"]), tmp_path, "ok")
    run_command(Command(1, "echo oops >&2; exit 2", ["oops", "[2]"]), tmp_path, "ok")
    with pytest.raises(AssertionError, match="printed"):
        run_command(Command(1, "echo 5 1 4 1 3", ["5 1 4 1 4"]), tmp_path, "wrong output")
    with pytest.raises(AssertionError, match="exited with 2"):
        run_command(Command(1, "exit 2", []), tmp_path, "unexpected failure")
    with pytest.raises(AssertionError, match="exited with 0"):
        run_command(Command(1, "true", ["[2]"]), tmp_path, "unexpected success")


def test_a_python_block_must_print_its_text_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(6 * 7)\n```\n\n```text\n42\n```\n\n"
                    "```python\nprint(1)\n```\n\nprose\n\n```text\nnot its output\n```\n")
    first, _, second, _ = blocks = parse(page)
    assert first.output is blocks[1] and second.output is None
    run_python(first, {})
    first.output.body = "41\n"
    with pytest.raises(AssertionError, match="the snippet printed"):
        run_python(first, {})


def test_every_python_block_with_output_on_the_core_pages_is_found():
    # the pages tests/nn/test_docs.py checks: each python block there has its output
    for name in ["attention.md", "multihead.md", "masks.md", "blocks.md",
                 "positional_encoding.md", "schedules.md"]:
        blocks = [b for b in parse(ROOT / "docs" / name) if b.lang == "python"]
        assert blocks and all(b.output is not None for b in blocks), name


def test_a_command_that_warns_at_its_test_sizes_fails_where_the_page_shows_no_warning(
        tmp_path):
    """A --warmup longer than a block's smaller --max-steps warns and learns nothing, hidden
    behind the page's ``...``: the sized command fails; the same warning at full size, or one
    the page shows, does not."""
    warns = Command(3, "echo 'warning: --warmup 10 is longer' >&2", ["..."])
    with pytest.raises(AssertionError, match=r"page.md:3: at its test sizes .* warns, which the "
                                             r"page does not show: warning: --warmup 10"):
        run_command(warns, tmp_path, "page.md:3", sized=True)
    run_command(warns, tmp_path, "page.md:3")
    shown = Command(3, warns.text + "; exit 2", ["warning: --warmup 10 is longer", "[2]"])
    run_command(shown, tmp_path, "page.md:3", sized=True)


def test_a_console_blocks_test_sizes_replace_the_values_it_shows_and_nothing_else(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```console test-sizes=--max-steps:6\n"
                    "$ attnlab train reverse --max-steps 600 \\\n    --out runs/r\n...\n"
                    "$ attnlab train reverse --max-steps=600 --warmup 600\n...\n```\n\n"
                    "```console test-sizes=--max-steps:6,--lr:1\n"
                    "$ attnlab train reverse --max-steps 600\n  steps  600\n```\n\n"
                    "```console test-sizes=max-steps\n$ attnlab plot pe\n```\n")
    first, second, third = parse(page)
    assert [at_test_sizes(first, c).text for c in commands(first)] == [
        "attnlab train reverse --max-steps 6 \\\n    --out runs/r",
        "attnlab train reverse --max-steps=6 --warmup 600"]
    assert unmarked_examples(page) == [
        f"{page.name}:9: the output of `attnlab train reverse --max-steps 600` shows 600, the "
        f"--max-steps its test size replaces",
        f"{page.name}:9: test-sizes names --lr, which no command sets",
        f"{page.name}:14: test-sizes=max-steps: give --FLAG:N[,--FLAG:N]"]
