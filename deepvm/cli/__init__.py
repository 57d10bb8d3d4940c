"""The ``deepvm`` command: one module per command group (docs/ARCHITECTURE.md,
"The command line"). Heavy imports (pandas, pyarrow, highspy) happen inside the commands so
``deepvm --help`` starts fast."""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Callable, Sequence

from deepvm.base.errors import DeepvmError
from deepvm.cli import _checkpoint as checkpoint
from deepvm.cli import _data as data
from deepvm.cli import _fleet as fleet
from deepvm.cli import _launch as launch
from deepvm.cli import _measure as measure
from deepvm.cli import _nightly as nightly
from deepvm.cli import _output as output
from deepvm.cli import _plan as plan
from deepvm.cli import _simulate as simulate
from deepvm.cli import _store as store
from deepvm.cli._arguments import EXIT_BAD_INPUT, Parser, flag_name, join_negative_values
from deepvm.store.location import request_timeout

__all__ = ["COMMANDS", "build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="deepvm",
        description="Which GPU cluster to rent for deep-learning training under an hourly "
        "budget (DeepVM, CCGrid 2024).",
    )
    from deepvm import __version__

    parser.add_argument("--version", action="version", version=f"deepvm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_global_flags(parser, False)
    plan.add_parsers(sub)
    fleet.add_parsers(sub)
    fleet.add_adopt_parser(sub)
    fleet.add_finish_parser(sub)
    launch.add_parsers(sub)
    data.add_parsers(sub)
    measure.add_parsers(sub)
    data.add_prices_parser(sub)
    store.add_parsers(sub)
    simulate.add_parsers(sub)
    nightly.add_parsers(sub)
    nightly.add_backtest_parser(sub)
    measure.add_scaling_parser(sub)
    checkpoint.add_parsers(sub)
    _every_command_takes_the_global_flags(parser)
    return parser


def _add_global_flags(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="print no progress on stderr (errors still)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="on an error, print its traceback too",
    )


def _every_command_takes_the_global_flags(parser: argparse.ArgumentParser) -> None:
    """-q and -v after the command name too (`deepvm recommend --budget 3 -q`); a
    command's own default never overrides one given before it."""
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):
                _add_global_flags(command, argparse.SUPPRESS)
                _every_command_takes_the_global_flags(command)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "recommend": plan.cmd_recommend,
    "sweep": plan.cmd_sweep,
    "compare": plan.cmd_compare,
    "fleet": fleet.cmd_fleet,
    "adopt": fleet.cmd_adopt,
    "finish": fleet.cmd_finish,
    "launch": launch.cmd_launch,
    "catalog": data.cmd_catalog,
    "flopp": data.cmd_flopp,
    "workloads": data.cmd_workloads,
    "benchmark": measure.cmd_benchmark,
    "benchmark-scaling": measure.cmd_benchmark_scaling,
    "fit": measure.cmd_fit,
    "nightly": nightly.cmd_nightly,
    "backtest": nightly.cmd_backtest,
    "prices": data.cmd_prices,
    "store": store.cmd_store,
    "simulate": simulate.cmd_simulate,
    "checkpoint": checkpoint.cmd_checkpoint,
}


def run() -> None:
    """The console script: ``main``, then exit with its status without running the
    interpreter's teardown, where pyarrow's and delta-rs's threads can abort the
    process ("terminate called without an active exception", apache/arrow#34314)
    and turn a finished command's status into 134. Output is flushed first."""
    import logging
    import os

    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    tokens = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not tokens:  # `deepvm` alone: what it can do
        parser.print_help()
        return 0
    try:
        args = parser.parse_args(join_negative_values(tokens))
    except SystemExit as exc:  # usage errors (already printed), --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    output.QUIET = args.quiet
    try:
        with request_timeout(getattr(args, "timeout", None)):
            return COMMANDS[args.command](args)
    except DeepvmError as exc:  # parameters it names are spelled as flags
        _traceback(args)
        print(f"deepvm: error: {exc.render(flag_name)}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:  # `deepvm ... | head`
        return 0
    except OSError as exc:  # the environment, not a bug: say which file
        _traceback(args)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"deepvm: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _traceback(args: argparse.Namespace) -> None:
    if args.verbose:
        traceback.print_exc()


if __name__ == "__main__":
    sys.exit(main())
