"""The command line's own text: `scaling --version`, and every command's help in one style."""

import argparse
import re
import shlex
import subprocess
import sys
from importlib import metadata

import pytest

import scaling
from scaling import cli
from scaling.cli import build_parser, main


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"scaling {scaling.__version__}\n"
    assert scaling.__version__ == metadata.version("scaling")     # the installed metadata agrees


def parsers(parser=None):
    """The top-level parser and every subcommand's, nested ones included."""
    parser = parser or build_parser()
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def test_every_metavar_is_one_style_and_no_help_shows_a_doubled_percent():
    seen = 0
    for parser in parsers():
        text = parser.format_help()
        assert "%%" not in text, parser.prog            # "95%%": a literal % escaped where it is not formatted
        for action in parser._actions:
            if action.option_strings and action.nargs == 0:
                continue                                # a switch takes no value: no metavar
            shown = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
            if isinstance(action, argparse._SubParsersAction) or action.choices:
                continue                                # {a,b} lists its choices
            # one upper-case word, or words joined by commas where the value is (--E-prior MEAN,SD)
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*(,[A-Z][A-Z0-9_]*)*", shown), f"{parser.prog}: {shown!r}"
            seen += 1
    assert seen > 50


@pytest.mark.parametrize("argv, expected", [
    (["fitt"], "scaling: error: unknown command 'fitt'; did you mean 'fit'?"),
    (["cost", "trian"], "scaling cost: error: unknown command 'trian'; did you mean 'train'?"),
    (["xyz"], "scaling: error: unknown command 'xyz'; known: sweep, runs,"),
])
def test_an_unknown_command_is_one_line_with_the_closest_name_and_exit_2(argv, expected, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(expected) and err.count("\n") == 1, err


@pytest.mark.parametrize("law, expected", [
    ("chinchila", "unknown law 'chinchila'; did you mean 'chinchilla'? (known: kaplan, chinchilla, besiroglu)"),
    ("moore", "unknown law 'moore'; known: kaplan, chinchilla, besiroglu"),
])
def test_an_unknown_law_is_one_line_with_the_closest_name_and_exit_2(law, expected, capsys):
    assert main(["plan", "--compute", "1e21", "--law", law]) == 2
    assert capsys.readouterr().err == f"scaling plan: error: {expected}\n"


def test_the_top_level_help_lists_every_command_on_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(commands) == 11
    listed = out.split("positional arguments:")[1].split("options:")[0].splitlines()[2:]   # after COMMAND
    assert [line.split()[0] for line in listed if line.strip()] == list(commands), out   # no line wrapped


def test_a_fit_is_named_one_way_and_the_old_spellings_still_parse():
    for parser in parsers():
        for action in parser._actions:
            if action.dest == "fit" and action.help != argparse.SUPPRESS:
                assert action.metavar == "FIT", parser.prog
            if action.dest == "source":                          # report: a fit or a run store
                assert action.metavar == "FIT_OR_RUNS_DIR", parser.prog
            if "--json" in action.option_strings:
                assert action.help, f"{parser.prog}: --json without help"
            if "--compute" in action.option_strings:
                assert action.metavar == "C", parser.prog
    parser = build_parser()
    assert parser.parse_args(["design", "x.yaml", "--prior", "fits/a"]).fit == parser.parse_args(
        ["design", "x.yaml", "--fit", "fits/a"]).fit
    assert parser.parse_args(["fit", "--fixed-E", "1.5"]).fixed_E == 1.5
    assert parser.parse_args(["fit", "--fixed-e", "1.5"]).fixed_E == 1.5
    design_help = next(p for p in parsers() if p.prog.endswith(" design")).format_help()
    fit_help = next(p for p in parsers() if p.prog.endswith(" fit")).format_help()
    assert "--prior" not in design_help and "--fit FIT" in design_help
    assert "--fixed-E" not in fit_help and "--fixed-e E" in fit_help


def test_each_command_s_line_in_the_top_level_help_is_its_own_module_s():
    # `scaling --help` lists the commands without importing their modules (COMMANDS): each line must be
    # what the command's module registers, and a command's parser is the same built alone or with all.
    full = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    lines = {c.dest: c.help for c in full._choices_actions}
    assert lines == {name: line for name, (_, line) in cli.COMMANDS.items()}
    for name in cli.COMMANDS:
        alone = next(a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
        assert alone.choices[name].format_help() == full.choices[name].format_help()


def test_the_top_level_help_imports_no_command():
    # Measured: 2-3 s when every command's module (scipy, pandas, the laws) was imported to list them.
    code = ("import sys\nfrom scaling.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('numpy', 'scipy', 'pandas', 'scaling.laws') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
def examples(parser) -> list[str]:
    """The commands of a parser's "examples:" epilog, each without its comment."""
    epilog = parser.epilog or ""
    assert epilog.startswith("examples:"), f"{parser.prog} --help has no examples"
    return [line.split("#")[0].strip() for line in epilog.splitlines()[1:] if line.startswith("  scaling ")]


def test_every_commands_help_has_examples_that_parse():
    # Each command and subcommand shows how it is called, and each example is a command line the
    # parser takes as written (a renamed flag left in an example fails here).
    for parser in parsers():
        shown = examples(parser)
        assert shown and "examples:\n  scaling" in parser.format_help(), parser.prog
        for line in shown:
            argv = shlex.split(line)[1:]
            assert line.startswith(parser.prog) or parser.prog == "scaling", (parser.prog, line)
            build_parser().parse_args(argv)            # exits 2, failing the test, on a flag it does not know
