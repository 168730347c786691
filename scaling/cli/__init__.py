"""The `scaling` command line: one module per command group, each adding its subcommands.

Every command is a thin layer over the Python API (`scaling.*`): it parses arguments, calls
the same functions a notebook would, and prints. A `UsageError`, or an `OSError` (a file that
cannot be read or written), becomes a one-line message and exit code 2; a traceback is shown
only with --debug. A warning is one line on stderr, `warning: <message>` (`show_warning`).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from importlib import import_module
from typing import Any, NoReturn

from scaling import __version__
from scaling.errors import UsageError, unknown_name

# Each command, in the order of the data flow: the module that registers it (`register(subparsers)`)
# and its line in `scaling --help`. Only the module of the command that runs is imported: the others
# would load scipy, pandas and the laws for nothing (`scaling --help` took 2-3 s), so they stand in
# the parser as their help line alone (tests/cli/test_cli_help.py holds these lines to the modules').
COMMANDS = {
    "sweep": ("sweep", "train the runs of a sweep config (skips finished runs)"),
    "runs": ("sweep", "print the table of runs in a run store"),
    "import": ("importing", "import runs logged with TensorBoard, W&B, MLflow or a CSV"),
    "tune": ("tune", "measure each shape's best learning rate; fit lr_opt against N"),
    "design": ("design", "the intervals a planned sweep would give, before training"),
    "fit": ("fit", "fit L(N, D) with bootstrap intervals; write fit.json"),
    "report": ("report", "a fit's report: figures, tables, hold-out check"),
    "cost": ("cost", "compute, time, money and memory of training and inference"),
    "compare": ("plan", "your fit against Kaplan, Chinchilla and Besiroglu"),
    "plan": ("plan", "compute-optimal N, D for budgets C, beside D = 20 N and Kaplan"),
    "validate": ("validate", "train the model a fit recommends, and two neighbours"),
}
COMMAND_MODULES = tuple(dict.fromkeys(module for module, _ in COMMANDS.values()))

class ExamplesFormatter(argparse.HelpFormatter):
    """argparse's help, with an epilog that starts "examples:" kept line by line as written (the
    description and the flags' help are wrapped as usual)."""

    def _format_text(self, text: str) -> str:
        if text.startswith("examples:"):
            return text.rstrip() + "\n"
        return super()._format_text(text)


class Once(argparse.Action):
    """An option that takes a value, given at most once: argparse keeps the last of two, so `--form
    kaplan --form farseer` fitted farseer, and `plan --compute 1e21 --compute 1e22` planned 1e22
    alone, without a word; a second value is refused, naming both. Every plain option of every
    command is one (`Parser` registers it as the default action); an alias shares its dest, so
    `--E 1 --fixed-e 2` is a second value too."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault(GIVEN, {})     # a default is no first value: track what was given
        if self.dest in given:
            parser.error(f"argument {'/'.join(self.option_strings)}: given twice ({_shown(given[self.dest])}, "
                         f"then {_shown(values)}); give it once")
        given[self.dest] = values
        setattr(namespace, self.dest, values)


GIVEN = "_given_once"     # the namespace's record of the options given, removed after parsing


def _shown(value: object) -> object:
    """An option's value as typed: a list of several (nargs) joined by spaces."""
    return " ".join(map(str, value)) if isinstance(value, list) else value


class Parser(argparse.ArgumentParser):
    """argparse, with a misspelt command (or `cost` subcommand) answered in one line with the
    closest name, exit code 2; and an option given twice refused (`Once`). Subparsers are built with
    the parent's class, so they inherit it and its help formatter (`ExamplesFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", ExamplesFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", None, Once)        # argparse's default action, "store", given once
        self.register("action", "store", Once)

    # The ignore: typeshed overloads parse_known_args on the namespace's type (as `cost_common.NumberArgs`).
    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        parsed.__dict__.pop(GIVEN, None)
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        """A malformed command line in one line, as every other error (argparse prints its whole usage
        first): what is wrong, and where the flags are listed. A value that begins with '-' reads
        as a flag to argparse, so a negative one is given as --flag=VALUE."""
        negative = message.endswith("expected one argument")
        hint = " (a value that begins with '-' goes as --flag=VALUE)" if negative else ""
        self.exit(2, f"{self.prog}: error: {message}{hint}; see `{self.prog} --help`\n")

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # argparse's own hook for a value outside `choices` (stable since Python 2.7).
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            self.exit(2, f"{self.prog}: error: {unknown_name('command', str(value), action.choices)}\n")
        super()._check_value(action, value)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: with every command's module (`command` None), or with only the
    module of `command` (the others stand in as their help line; an unknown name: none)."""
    parser = Parser(
        prog="scaling",
        description="Measure your own scaling laws: sweep, fit, compare, plan.",
        epilog="examples:\n"
               "  scaling fit --dataset chinchilla         # a first answer: Hoffmann et al.'s runs refitted\n"
               "  scaling fit --csv points.csv             # your table of N, D, loss: the law, intervals, verdict\n"
               "  scaling compare fits/points              # its exponents beside Kaplan, Chinchilla, Besiroglu\n"
               "  scaling plan --fit fits/points --compute 1e21 1e22   # what to train at those budgets\n"
               "  scaling report fits/points               # figures and a report (fits/points/report/)\n"
               "each command's flags: scaling COMMAND --help",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"scaling {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = COMMAND_MODULES if command is None else [COMMANDS[command][0]] if command in COMMANDS else []
    for name in modules:
        import_module(f"scaling.cli.{name}").register(subparsers)
    for name, (_, line) in COMMANDS.items():
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=line)
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first word that is not a flag (None: none, as `scaling --help`)."""
    return next((word for word in argv if not word.startswith("-")), None)


def flag_names(exc: UsageError) -> str:
    """" (--config)": the flags of the options a library error asks for, which its message names
    in words only (the same error reaches a notebook, where there are no flags). A flag is its
    option's keyword with dashes: one vocabulary for the API and the command line."""
    flags = ["--" + name.replace("_", "-") for name in exc.options]
    return f" ({', '.join(flags)})" if flags else ""


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: object = None, line: str | None = None) -> None:
    """A warning as every command shows it: `warning: <message>`, one line on stderr. Python's own
    format adds the file, line and source line that raised it, which tell a user nothing (the
    warnings filters still decide which are shown). sys.stderr is looked up at each warning: under
    a command's progress bars it is rich's, which prints the line above them."""
    print(f"warning: {' '.join(str(message).splitlines())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(command_of(argv) or "").parse_args(argv)     # "": no command named, no module imported
    previous, warnings.showwarning = warnings.showwarning, show_warning     # the command's: put back after it
    try:
        return args.func(args) or 0
    except UsageError as exc:
        if args.debug:
            raise
        # One line, as a warning is (`show_warning`): a message of several (a config's list of
        # problems) has them joined, so that the line a script logs names every one.
        message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"scaling {args.command}: error: {message}{flag_names(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"scaling {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        # A file that cannot be read or written (missing, a full disk, no permission): the
        # user's to fix, so a message naming the file rather than a traceback.
        if args.debug:
            raise
        where = f": {exc.filename}" if exc.filename else ""
        print(f"scaling {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = previous
