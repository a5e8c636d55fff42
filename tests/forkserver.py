"""A fork server for ``attnlab`` commands, so that the commands the tests run (the docs pages'
examples, tests/test_docs_examples.py; both processes of a DDP run, tests/reliability) do not
each pay for starting Python and importing torch and Lightning.

A fresh ``attnlab train`` process spends about 16 s of CPU importing before it does anything:
torch 4 s, Lightning 12 s (it imports torchmetrics, which imports transformers and scipy).
The pages run about a hundred commands, most of them in a process of their own, so the imports
were most of what the docs tests cost. This server imports them once; each command then runs
in a process forked from it, so every command still has a process of its own (its own
working directory, environment, standard streams, exit status and exit handlers), started
from a state a fresh ``attnlab`` process would also reach (modules imported, nothing run).

How a command gets here: a test runs this server's ``attnlab`` (``SHIM``, a small Python script
without site packages), by its path or with its directory first on PATH; it connects to the
server's Unix socket and passes it its argument list, working directory, environment and
standard streams (the file descriptors themselves). The server forks a monitor for it, which
forks the command: ``sys.exit(console())`` with ``sys.argv`` as the console script's, the
shim as ``sys.argv[0]`` (Lightning's DDP launcher starts the other ranks as ``python
sys.argv[0] ...``: through the shim, each rank a process forked from this server, as the
first is, with the rank's own environment), the shim's directory taken off PATH. The monitor
reports the command's exit status to the shim, which exits with it (or dies of the same
signal), and kills the command if the shim goes away (a timeout). A shim that cannot connect
(the server has died, perhaps in the middle of a DDP run) runs the next ``attnlab`` on PATH
cold instead, as a plain command would; with none there it fails as bash does (127). Shell
syntax around a command (pipes, redirections, ``$(...)``) is still bash's. The command's
process ends as an interpreter does, less the teardown of the server's modules
(``_exit_as_a_process_does``: a second of CPU a command).

The notebooks' kernels start the same way (tests/test_notebooks.py): a server started with
``--kernel`` also imports ipykernel, in the environment a kernel sets up before it runs a cell
(``MPLBACKEND``); the kernel's command is the ``kernel`` shim, and the forked process runs
what ``python -m ipykernel_launcher`` runs. A notebook still runs in a fresh kernel process,
from the first cell; its own imports find the modules loaded.

Not a test module: run as ``python forkserver.py SOCKET [--kernel]``.
"""
from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import select
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!Q")  # the length of the JSON request that follows

# The `attnlab` a test runs instead of the real one. {python}: this interpreter; {socket}: the
# server's. `-S`: no site packages, so it starts in a few milliseconds.
SHIM = '''#!{python} -S
import json, os, shutil, signal, socket, struct, sys
{argv}
request = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": env}}).encode()
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    server.connect({socket!r})
except OSError as e:  # the server is gone: attnlab starts cold; a kernel names the log
    if cold:  # e.g. a DDP run's rank 1, relaunched after the server died
        os.execve(cold[0], cold, env)
    print("attnlab (test fork server): cannot connect to " + {socket!r} + " (" + str(e.strerror)
          + "); its log: " + {log!r}, file=sys.stderr)
    sys.exit(1)
socket.send_fds(server, [struct.pack("!Q", len(request))], [0, 1, 2])
server.sendall(request)
answer = b""
while len(answer) < 8:
    part = server.recv(8 - len(answer))
    if not part:
        print("attnlab (test fork server): the server closed the connection", file=sys.stderr)
        sys.exit(1)
    answer += part
code = struct.unpack("!q", answer)[0]
if code < 0:  # killed by signal -code: die of it too, as the command's own process would
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
'''


# How the shim makes the command's argv and environment, and what it runs instead when the
# server is gone (``cold``): the first ``attnlab`` on PATH after the shim's own directory, which
# is taken off PATH; or a Jupyter kernel's (``--kernel``), which fails naming the server's log.
ATTNLAB_ARGV = '''here = os.path.dirname(os.path.abspath(__file__))
path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                       if p and os.path.abspath(p) != here)
real = shutil.which("attnlab", path=path)
if real is None:
    print("bash: attnlab: command not found", file=sys.stderr)
    sys.exit(127)
env = dict(os.environ, PATH=path)
argv = [os.path.abspath(__file__), *sys.argv[1:]]  # a DDP run's other ranks: forked here too
cold = [sys.executable, real, *sys.argv[1:]]  # without the server: the real one, cold'''
KERNEL_ARGV = '''env = dict(os.environ)
argv = ["ipykernel_launcher", *sys.argv[1:]]
cold = None'''


def write_shim(directory: str, address: str, name: str = "attnlab") -> str:
    """Writes the shim into ``directory``: ``attnlab`` (to be put first on PATH), or
    ``kernel`` (a Jupyter kernel's command, for a server started with ``--kernel``); its path."""
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(SHIM.format(python=sys.executable, socket=address,
                            log=os.path.join(os.path.dirname(address), "server.log"),
                            argv=KERNEL_ARGV if name == "kernel" else ATTNLAB_ARGV))
    os.chmod(path, 0o755)
    return path


# The servers ``running`` has started and not yet stopped, by their directory (``serving``).
_servers: dict = {}


def serving(where) -> bool:
    """Whether the server started in the directory ``where`` is still running: a test that
    finds it gone (killed, crashed) runs its command the plain way instead."""
    server = _servers.get(str(where))
    return server is not None and server.poll() is None


@contextlib.contextmanager
def running(spawn, where: str, env: dict, kernel: bool = False, ready_within: float = 300):
    """Starts a server with ``spawn`` (conftest's ``spawn_session``) in ``env``, its socket and
    log (server.log: each command's CPU seconds) in the directory ``where``; yields the path of
    its shim (``write_shim``). Fails, naming the log, when the server has not said it is ready
    within ``ready_within`` seconds (its imports take seconds). At the end it stops the server,
    which first waits for any command still running."""
    import subprocess

    address = os.path.join(where, "socket")
    log_path = os.path.join(where, "server.log")
    log = open(log_path, "w")
    server = spawn([sys.executable, __file__, address, *(["--kernel"] if kernel else [])],
                   env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    # "ready\n" comes in one write, so a readline after select does not block
    if not select.select([server.stdout], [], [], ready_within)[0]:
        server.kill()
        log.close()
        raise AssertionError(f"the fork server did not say it was ready within {ready_within:g}"
                             f" s; its log: {log_path}")
    ready = server.stdout.readline()
    if ready != "ready\n":
        log.close()
        with open(log_path) as f:
            raise AssertionError(f"the fork server did not start:\n{f.read()}")
    _servers[str(where)] = server
    try:
        yield write_shim(where, address, "kernel" if kernel else "attnlab")
    finally:
        del _servers[str(where)]
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass  # spawn_session kills it
    log.close()


def _preload(kernel: bool) -> None:
    """What any ``attnlab`` command may import: torch, Lightning (and what it imports), the
    command modules; for a kernel, also ipykernel. Nothing here reads the working directory
    at import; the environment is the one the commands (or kernels) get."""
    import torch  # noqa: F401
    import lightning.pytorch  # noqa: F401

    from attnlab import cli
    import attnlab.training.predictor  # noqa: F401

    cli.build_parser()  # imports every command's module
    if kernel:
        from ipykernel import kernelapp  # noqa: F401
    # Out of the collector's reach: a command's collections then do not touch (and so copy)
    # the server's pages. What the imports made lives as long as the process anyway.
    gc.collect()
    gc.freeze()
    threads = os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ["main"]
    if len(threads) != 1:  # a forked child keeps only the forking thread: locks could hang it
        sys.exit(f"forkserver: {len(threads)} threads after the imports; forking is unsafe")


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        part = conn.recv(min(size - len(body), 1 << 16))
        if not part:
            raise EOFError("the shim went away")
        body += part
    return json.loads(body), fds


def _become_the_command(request: dict, fds: list[int]) -> None:
    """In the forked command process: its streams, directory, environment and argv, then the
    console script's ``sys.exit(console())``, raised up through the server's frames to
    ``_exit_as_a_process_does``, which ends the process."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        old = getattr(sys, name)
        new = io.TextIOWrapper(io.open(fd, mode + "b", closefd=False), encoding=old.encoding,
                               errors=old.errors, line_buffering=name == "stderr" or os.isatty(fd))
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    if sys.argv[0] == "ipykernel_launcher":  # what `python -m ipykernel_launcher` runs
        import importlib.util

        sys.argv[0] = importlib.util.find_spec("ipykernel_launcher").origin
        del sys.path[0]  # the kernel puts its working directory back (InteractiveShellApp)
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        return
    sys.path[0] = os.path.dirname(sys.argv[0])  # the shim's directory, as Python sets a script's
    from attnlab.cli import console

    sys.exit(console())


def _monitor(conn: socket.socket) -> tuple[dict, list[int]] | None:
    """In the monitor process: forks the command, waits for it, sends its exit status (negative:
    the signal that killed it); kills it if the shim's connection closes first. Returns only
    in the command's process: what it is to run."""
    request, fds = _receive(conn)
    pid = os.fork()
    if pid == 0:
        conn.close()
        return request, fds
    for fd in fds:
        os.close(fd)
    done = os.pidfd_open(pid)
    ready, _, _ = select.select([done, conn], [], [])
    if done not in ready:  # the shim was killed (its test timed out): end the command too
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    # the command's CPU seconds, in the server's log (its stderr)
    print(f"{usage.ru_utime + usage.ru_stime:.3f}\t{' '.join(request['argv'][1:])}",
          file=sys.stderr, flush=True)
    try:
        conn.sendall(struct.pack("!q", os.waitstatus_to_exitcode(status)))
    except OSError:
        pass
    return None


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _stop(signum, frame):
    """SIGTERM: waits for the commands still running (so that their CPU time is counted in
    this process's children, and in the test process that waits for it), then exits."""
    _reap_all()
    os._exit(0)


def serve(address: str, kernel: bool = False) -> tuple[dict, list[int]]:
    """Accepts commands (or kernels) until SIGTERM. Returns only in a command's process (no
    ``finally`` on the way: the command's exit must be its own)."""
    _preload(kernel)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(16)
    signal.signal(signal.SIGTERM, _stop)
    print("ready", flush=True)
    parent = os.getppid()
    while True:
        if not select.select([server], [], [], 5)[0]:
            if os.getppid() != parent:  # the test process is gone (killed): so is the server
                _stop(None, None)
            continue
        conn, _ = server.accept()
        if os.fork() == 0:  # the monitor
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            server.close()
            command = _monitor(conn)
            if command is not None:
                return command
            os._exit(0)
        conn.close()
        while True:  # reap the monitors that have finished
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def _exit_as_a_process_does(run) -> None:
    """Runs the command (``run()``) and ends its process as the interpreter would, up to its
    last step, which it leaves out: the teardown of every module. In a fork of this server that
    teardown touches each object the server imported, so the kernel copies most of the
    server's memory page by page: about 1 s of CPU a command (a hundred on the docs pages),
    for objects the command never made and memory the operating system takes back at once.

    What a finishing interpreter does first is done here in its order (Py_FinalizeEx): the exit
    status from ``SystemExit`` (a message printed and 1, as Python does), a traceback and 1 for
    any other exception (death by SIGINT for ``KeyboardInterrupt``), the exception and its
    frames freed, non-daemon threads joined, atexit handlers run, standard streams flushed
    (120 if that fails), unreachable objects collected. Only objects still reachable from a
    module when the command ends are not finalised."""
    import atexit
    import threading

    interrupted = False
    try:
        run()
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        interrupted = isinstance(e, KeyboardInterrupt)
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = 120
    gc.collect()
    if interrupted:  # Python re-raises a KeyboardInterrupt that ends it as SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    command = serve(sys.argv[1], kernel="--kernel" in sys.argv[2:])
    _exit_as_a_process_does(lambda: _become_the_command(*command))
