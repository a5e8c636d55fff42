"""``attnlab view DIR --input TEXT [--out FILE.html] [--serve [--port N]] [--checkpoint last]``:
an interactive page
of a trained run's attention on one input — every layer and head, tokens on both axes — as one
self-contained HTML file (no network request; it can be mailed or committed).

The page is written to ``--out`` (default ``DIR/attention.html``, never replaced unless named
with ``--out``) and its path printed as the last line. ``--serve`` then also serves it on
127.0.0.1 until Ctrl-C or SIGTERM (``kill PID``). Never imports Lightning.
"""
from __future__ import annotations

import argparse
import os
import signal
from dataclasses import dataclass

from ..errors import UsageError
from ..settings import ModelRunSettings, add_flags, check_options, setting
from .checkpoint import add_checkpoint_flag
from .threads import use_threads

PAGE_FORMATS = (".html", ".htm")
DEFAULT_NAME = "attention.html"


@dataclass
class ViewOptions(ModelRunSettings):
    """``attnlab view``'s typed flags (and --threads)."""

    port: int = setting(None, low=0, most=65535, optional=True, metavar="N",
                        help="the port for --serve (default: any free one)")


def register(sub) -> None:
    p = sub.add_parser("view", help="an interactive page of a run's attention on an input",
                       description="Write an interactive page of a trained run's attention on "
                                   "--input: a grid of every layer and head, a large view of "
                                   "one with the tokens on both axes, the weights of a token "
                                   "on hover. One HTML file that works offline.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--input", required=True, metavar="TEXT",
                   help="the input, as for `attnlab predict` (a translate run: the source text; "
                        "jets: FILE:ROW)")
    p.add_argument("--out", metavar="FILE.html",
                   help=f"the page to write (default DIR/{DEFAULT_NAME}, which is never "
                        f"replaced unless you name it here)")
    p.add_argument("--serve", action="store_true",
                   help="also serve the page on 127.0.0.1 until Ctrl-C or SIGTERM")
    add_checkpoint_flag(p)
    add_flags(p, ViewOptions)
    p.set_defaults(func=run)


def _check_flags(args) -> None:
    from .inputs import check_input

    check_input(args.input)
    if args.port is not None and not args.serve:
        raise UsageError("--port is for --serve; add --serve or leave --port out")
    check_options(args, ViewOptions)


def attention_layers(task, run_dir, cfg, text):
    """(layers, query tokens, key tokens) of the trained model on ``text``: the runtime's own
    ``attention_layers`` (a translation's three groups, a jet's every constituent), else its
    ``attention_maps`` as layers of the task's kind of attention (an lm's: "causal", also on a
    one-token input, whose map cannot show it), else "causal" where no weight lies above the
    diagonal."""
    from ..explorer.view import layers_of

    runtime = task.runtime()
    if task.capabilities.attention_layers:
        return runtime.attention_layers(task, run_dir, cfg, text)
    maps, x_labels, y_labels = runtime.attention_maps(task, run_dir, cfg, text, label="--input")
    return layers_of(maps, task.capabilities.attention_kind), y_labels, x_labels


def write_page(args):
    """Check the flags and the run, then write the page; return its path."""
    from pathlib import Path

    from ..loading import check_run_dir, weights_from
    from ..tasks import get_task
    from .plot import _write, choose_out, shown_record

    _check_flags(args)
    given = args.out is not None
    if given:
        choose_out(args.out, None, formats=PAGE_FORMATS)
    run_dir, cfg = check_run_dir(args.run_dir, command="view", checkpoint=args.checkpoint)
    use_threads(args, "one", run_dir)
    out = choose_out(args.out, Path(run_dir) / DEFAULT_NAME, formats=PAGE_FORMATS, what="a page")
    task = get_task(cfg.task)
    from ..explorer import AttentionView, attention_data
    from ..explorer.data import WeightsError
    from .plot import attention_focus, shown_input

    with weights_from(run_dir, cfg, args.checkpoint, say=True) as step:
        layers, query_tokens, key_tokens = attention_layers(task, run_dir, cfg, args.input)
        row = attention_focus(task, run_dir, cfg, args.input)  # a graph node's: opened pinned
    title = f"{cfg.task}: attention on {shown_input(args.input, 61)!r}"
    if row is not None:
        title += f", query row {row} pinned"
    try:  # the weights checked before anything is written (a diverged run's are NaN)
        view = AttentionView(attention_data(layers, query_tokens, key_tokens, task=cfg.task,
                                            run=str(args.run_dir), title=title, focus=row,
                                            record=shown_record(run_dir, args.checkpoint, step)))
    except WeightsError as e:
        raise UsageError(f"{args.run_dir}: its attention on --input cannot be shown: {e}") \
            from None
    return Path(_write(lambda: view.save(out), out, given=given))


def serve(path, port: int) -> None:
    """Serve the file ``path`` (nothing else) on 127.0.0.1:``port`` until Ctrl-C or SIGTERM."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = path.read_bytes()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] not in ("/", f"/{path.name}"):
                self.send_error(404, "only the attention page is served here")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # requests are not news
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Page)
    except OSError as e:
        raise UsageError(f"--port {port}: cannot serve on it ({e.strerror or e})") from None
    # Both before the line that says how to stop: a Ctrl-C or kill the moment it is read must
    # find the handler set and land inside the try.
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        print(f"serving http://127.0.0.1:{server.server_address[1]}/{path.name} "
              f"({_how_to_stop()})", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()


def _stop(signum, frame) -> None:
    """SIGTERM (``kill PID``) stops the server as Ctrl-C does."""
    raise KeyboardInterrupt


def _how_to_stop() -> str:
    """How this process stops. A process started with SIGINT ignored (a background job of a
    shell without job control, ``nohup``, some supervisors) inherits that, and Python then
    leaves Ctrl-C ignored: saying "Ctrl-C stops" would be untrue."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return (f"Ctrl-C is ignored by this process, which was started with SIGINT ignored, "
                f"as a background job is; kill {os.getpid()} stops it")
    return "Ctrl-C stops"


def run(args: argparse.Namespace) -> int:
    path = write_page(args)
    print(path, flush=True)
    if args.serve:
        serve(path, args.port or 0)
    return 0
