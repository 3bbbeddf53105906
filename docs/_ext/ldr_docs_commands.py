"""The package's commands and their argument parsers, reached without running a command.

Each command builds its ``argparse`` parser inside its entry point, sometimes after a
dispatch on the first arguments (``ldr-eval contrastive``, ``ldr-main predict_domains``,
``ldr-main --list-families``, every ``ldr-main`` run type through ``onmt-main``'s own
parser). :func:`capture` calls the entry point with ``ArgumentParser.parse_args``
replaced by a function that records the parser and the arguments it was given, then
stops the command: nothing after the parsing runs (no model is loaded, no file is read
or written). The captured parser is the command's own, so:

- :func:`reference` renders every command's and sub-command's ``--help`` text for the
  command reference (``docs/_generated/commands.md``): it cannot drift from the code;
- :func:`check_command_line` parses a documented command line with the command's real
  parser (the test of the README's and the pages' ``bash`` blocks), as the command would,
  argument rewriting included (``onmt-main``'s ``--placeholder`` before the run type).

Why not ``COMMAND --help`` in a subprocess: every command imports TensorFlow (3 to 5 s
per process), and ``--help`` only shows the options, where parsing a whole documented
command line also checks the values, choices and sub-commands it uses.

The commands are read from the installed distributions' ``console_scripts`` entry points
(``ldr-opennmt``'s, and ``onmt-main`` from ``OpenNMT-tf``), so a new command shows up in
the reference by itself.
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import os
import sys

#: The distribution whose commands are documented, and the upstream commands the
#: documentation uses.
DISTRIBUTION = "ldr-opennmt"
UPSTREAM = {"onmt-main": "OpenNMT-tf"}

#: The width of the rendered help (argparse reads COLUMNS).
COLUMNS = "100"


class _Captured(BaseException):
    """Raised by the replaced ``parse_args``: a ``BaseException``, so that the commands'
    own ``except Exception`` / ``except UserError`` handlers let it through."""

    def __init__(self, parser, args):
        super().__init__(parser.prog)
        self.parser = parser
        self.args = args


def entry_points():
    """``{command: "module:function"}`` of the package's console scripts and of the
    upstream commands in :data:`UPSTREAM`."""
    commands = {}
    for name, distribution in [(None, DISTRIBUTION)] + sorted(UPSTREAM.items()):
        for entry in importlib.metadata.distribution(distribution).entry_points:
            if entry.group == "console_scripts" and (name is None or entry.name == name):
                commands[entry.name] = entry.value
    return commands


def sub_commands(command):
    """The argument lists that select each parser of a command whose entry point
    dispatches before parsing (read from the command's module, not retyped)."""
    if command == "ldr-main":
        from ldr_opennmt.cli import main  # pylint: disable=import-outside-toplevel

        return [[], [main.PREDICT_DOMAINS], [main.LIST_FAMILIES], [main.CHECK_FAMILY]]
    if command == "ldr-eval":
        from ldr_opennmt.cli import evaluate  # pylint: disable=import-outside-toplevel

        return [[], [evaluate.CONTRASTIVE], [evaluate.FIT_ENSEMBLE]]
    return [[]]


@contextlib.contextmanager
def _environment(command, argv):
    saved_argv, saved_parse = sys.argv, argparse.ArgumentParser.parse_args
    saved_env = {k: os.environ.get(k) for k in ("COLUMNS", "LDR_ALLOW_CPU")}

    def parse_args(self, args=None, namespace=None):
        raise _Captured(self, list(sys.argv[1:] if args is None else args))

    sys.argv = [command] + list(argv)
    argparse.ArgumentParser.parse_args = parse_args
    # ldr-main reads model_dir from the configuration files before onmt-main parses (to
    # remove a model directory the run created and left empty): documented command
    # lines name files that do not exist here, and a capture creates nothing. The function
    # is looked up by name in the package's loaded modules (it has moved between modules).
    patched = [
        (module, module.command_line_model_dir)
        for name, module in list(sys.modules.items())
        if name.startswith("ldr_opennmt")
        and getattr(getattr(module, "command_line_model_dir", None), "__module__", None) == name
    ]
    for module, _ in patched:
        module.command_line_model_dir = lambda global_argv: None
    try:
        yield
    finally:
        sys.argv = saved_argv
        argparse.ArgumentParser.parse_args = saved_parse
        for module, function in patched:
            module.command_line_model_dir = function
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def capture(command, argv=()):
    """The parser a command builds for :obj:`argv`, and the arguments it parses.

    Returns:
      ``(parser, args)``.

    Raises:
      RuntimeError: if the command returned or failed without parsing.
    """
    module, _, function = entry_points()[command].partition(":")
    main = getattr(importlib.import_module(module), function)
    output = io.StringIO()
    with _environment(command, argv):
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                # onmt-main's main() takes no argument (it reads sys.argv).
                if command in UPSTREAM:
                    main()
                else:
                    main(list(argv))
        except _Captured as captured:
            return captured.parser, captured.args
        except SystemExit as e:
            raise RuntimeError(
                "%s %s: exited (%s) before parsing: %s" % (command, argv, e, output.getvalue())
            )
    raise RuntimeError(
        "%s %s: returned without parsing its arguments: %s" % (command, argv, output.getvalue())
    )


def check_command_line(command, argv):
    """Parses a documented command line with the command's parser.

    Returns:
      ``None`` when it parses, else argparse's error message.
    """
    parser, args = capture(command, argv)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), _environment(command, argv):
        argparse.ArgumentParser.parse_args = _ORIGINAL_PARSE_ARGS
        try:
            parser.parse_args(args)
        except SystemExit as e:
            if e.code:
                return stderr.getvalue().strip() or "exit status %s" % e.code
    return None


_ORIGINAL_PARSE_ARGS = argparse.ArgumentParser.parse_args


def _sub_parsers(parser):
    for action in parser._actions:  # pylint: disable=protected-access
        if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
            for name, sub in action.choices.items():
                yield name, sub


def _help(parser):
    with _environment(parser.prog, []):
        return parser.format_help().rstrip()


def reference():
    """The command reference, as MyST Markdown: one section per command, the help of
    every parser it builds, sub-commands included."""
    lines = [
        "# Commands",
        "",
        "Generated when the site is built, from the argument parsers of the installed",
        "commands (the `console_scripts` of `setup.py`, and OpenNMT-tf's `onmt-main`):",
        "every option below is one the code accepts. `ldr-main` takes every option and",
        "run type of `onmt-main`, with the multi-domain Runner.",
        "",
    ]
    for command in sorted(entry_points(), key=lambda c: (c in UPSTREAM, c)):
        lines += ["(command-%s)=" % command, "## `%s`" % command, ""]
        seen = set()
        for argv in sub_commands(command):
            parser, _ = capture(command, argv)
            if id(parser) in seen:
                continue
            seen.add(id(parser))
            title = " ".join([command] + list(argv))
            if argv:
                lines += ["### `%s`" % title, ""]
            lines += ["```text", _help(parser), "```", ""]
            for name, sub in _sub_parsers(parser):
                # ldr-main ... predict_domains: the run type is a sub-parser of its own.
                heading = (
                    "`%s`, after the run type" % title
                    if argv[-1:] == [name]
                    else ("`%s %s`" % (title, name))
                )
                lines += ["### " + heading, "", "```text", _help(sub), "```", ""]
    return "\n".join(lines)
