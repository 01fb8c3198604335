"""``jobctl``: the click entry point, global options and error handling.

stdout carries only data (tables or JSON); every diagnostic goes to stderr.
Errors print one line, ``jobctl: error: ...``, and exit with a documented
:class:`~jobctl.exitcodes.ExitCode`; no traceback reaches the operator.

Only click and the light core modules are imported at start-up: a
command's module is imported when it runs (all of them for ``--help``) and
layouts, rich, textual and pyspark by the commands that need them.
"""

from __future__ import annotations

import gc
import sys

import click

from ..errors import JobctlError
from ..exitcodes import ExitCode
from ..session import Session
from .options import Finite

__all__ = ["cli", "main"]

#: Sessions of the running invocation, so the last-resort handler can scrub secrets.
_SESSIONS: list[Session] = []

#: Whether :func:`main` paused the cyclic garbage collector for this process's start-up.
_GC_PAUSED = False
#: Modules of commands that end the start-up at their first connection
#: (:attr:`Session.on_connect`) rather than when they start: the operations,
#: whose first step connects (after checking the request); the imports and
#: the connection (redis-py above all) are then inside the pause.
_END_AT_CONNECT = ("ops_cmds",)


def _pause_gc() -> None:
    """Start-up of a whole ``jobctl`` process (``main()`` without ``argv``):
    the imports (redis-py's above all) allocate ~10^5 objects that live until
    exit, and the cyclic garbage collector would walk them again at every
    collection (about a tenth of an empty operation's instructions).  Paused
    here until :func:`_end_startup`."""
    global _GC_PAUSED
    if gc.isenabled():
        gc.disable()
        _GC_PAUSED = True


def _end_startup(freeze: bool = True) -> None:
    """Resume the collector paused by :func:`_pause_gc` (no-op otherwise);
    ``freeze``: first move every object alive now to the permanent
    generation (``gc.freeze()``), so no later collection walks them."""
    global _GC_PAUSED
    if _GC_PAUSED:
        _GC_PAUSED = False
        if freeze:
            gc.freeze()
        gc.enable()

_EPILOG = "\b\nExit codes:\n" + "\n".join(
    f"  {c.value:>3}  {c.doc}" for c in ExitCode
) + "\n\b\nServer: --url, else --profile, else $JOBCTL_REDIS_URL, else $REDIS_URL,\n" \
    "else the config's default_profile, else redis://localhost:6379/0."


#: The modules of ``jobctl.cli`` that hold the commands (each in its
#: ``COMMANDS``), in the order ``jobctl --help`` lists them.
_COMMAND_MODULES = ("read_cmds", "ops_cmds", "admin_cmds", "demo_cmd", "tui_cmd", "runbook_cmds", "metrics_cmds",
                    "export_cmds", "recovery_cmds")
#: Where a command name is looked for first: the operations, whose start-up
#: the bulk benchmarks time (issue 11); then the others in :data:`_COMMAND_MODULES` order.
_SEARCH_FIRST = ("ops_cmds",)


class _Group(click.Group):
    """Lists commands in :data:`_COMMAND_MODULES` order and imports a
    module of commands only when needed: running one command imports the
    module that holds it (``jobctl redrive`` does not import the export,
    runbook or recovery commands); listing them (``--help``, a mistyped
    name, completion) or reading :attr:`commands` imports them all."""

    def __init__(self, *args, **kwargs) -> None:
        self._loaded: set[str] = set()
        self.module_of: dict[str, str] = {}  # command name -> its module in _COMMAND_MODULES
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> dict[str, click.Command]:
        self._load(_COMMAND_MODULES)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def _load(self, names: tuple[str, ...]) -> None:
        """Import the command modules ``names`` not imported yet; once all
        are, the commands are kept in :data:`_COMMAND_MODULES` order (then
        any added with :meth:`add_command`)."""
        todo = [n for n in names if n not in self._loaded]
        if not todo:
            return
        import importlib

        self._loaded.update(todo)  # before importing: a module reading cli.commands must not recurse here
        mods = {n: importlib.import_module(f"{__package__}.{n}") for n in todo}
        for name, mod in mods.items():
            for command in mod.COMMANDS:
                self._commands[command.name] = command
                self.module_of[command.name] = name
        if len(self._loaded) == len(_COMMAND_MODULES):
            ordered = {c.name: c for n in _COMMAND_MODULES
                       for c in importlib.import_module(f"{__package__}.{n}").COMMANDS}
            self._commands = ordered | {k: v for k, v in self._commands.items() if k not in ordered}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for name in _SEARCH_FIRST + _COMMAND_MODULES:
            if cmd_name in self._commands:
                break
            self._load((name,))
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_Group, epilog=_EPILOG, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", metavar="URL", help="Redis URL (redis://, rediss://, unix://, redis+cluster://h1:p1,h2:p2, "
              "redis+sentinel://s1:p1/SERVICE/DB).")
@click.option("--profile", metavar="NAME", help="Named connection profile from the config file.")
@click.option("--config", "config_file", metavar="PATH", type=click.Path(dir_okay=False),
              help="Config file (else $JOBCTL_CONFIG, ./jobctl.toml, the user config dir).")
@click.option("--read-only", is_flag=True, help="Refuse every mutating command.")
@click.option("--timeout", type=Finite(0.1, 300), default=5.0, show_default=True,
              help="Socket timeout in seconds.")
@click.option("--ca-cert", metavar="PEM", help="TLS: CA certificate(s) to verify the server with.")
@click.option("--client-cert", metavar="PEM", help="TLS: client certificate (with --client-key).")
@click.option("--client-key", metavar="PEM", help="TLS: client private key.")
@click.option("--tls-insecure", is_flag=True, help="TLS: do not verify the server's certificate (warns).")
@click.option("--read-from", type=click.Choice(["primary", "replicas"]), default=None,
              help="Where status, ls, export and metrics read: a cluster's or Sentinel service's replicas keep "
                   "an incident's reads off the primaries (default: the profile's read_from, else primary).")
@click.version_option(package_name="jobctl")
@click.pass_context
def cli(ctx: click.Context, url, profile, config_file, read_only, timeout, ca_cert, client_cert, client_key,
        tls_insecure, read_from) -> None:
    """Inspect and repair Redis-backed job queues."""
    if ctx.invoked_subcommand is None:  # bare `jobctl`: the help, exit 0
        click.echo(ctx.get_help())
        ctx.exit(0)
    from ..topology import TlsOptions

    session = Session(config_file=config_file, url=url, profile=profile,
                      read_only_flag=read_only, timeout_s=timeout, read_from_flag=read_from,
                      tls=TlsOptions(ca_cert, client_cert, client_key, verify=not tls_insecure),
                      on_connect=_end_startup)
    if ctx.command.module_of.get(ctx.invoked_subcommand or "") not in _END_AT_CONNECT:
        _end_startup()
    ctx.obj = session
    _SESSIONS.append(session)
    ctx.call_on_close(session.close)


def _fail(message: str, code: ExitCode) -> int:
    click.echo(f"jobctl: error: {message}", err=True)
    return int(code)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and exits with) an :class:`ExitCode` value.

    Without ``argv`` (a whole ``jobctl`` process: the console script,
    ``python -m``) the cyclic garbage collector is paused for the start-up
    (:func:`_pause_gc`); in-process callers passing ``argv`` are left alone."""
    if argv is None:
        _pause_gc()
    try:
        try:
            rv = cli.main(args=argv, prog_name="jobctl", standalone_mode=False)
        except click.exceptions.Exit as exc:
            rv = exc.exit_code
        code = int(rv) if isinstance(rv, int) else 0
    except click.exceptions.Abort as exc:
        # click turns Ctrl-C (and EOF at a prompt) into Abort: keep them apart
        # from an operator's "no" at a confirmation.
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            code = _fail("interrupted", ExitCode.INTERRUPTED)
        else:
            code = _fail("aborted", ExitCode.ABORTED)
    except click.ClickException as exc:
        message = exc.format_message().splitlines()[0] if exc.format_message() else exc.__class__.__name__
        ctx = getattr(exc, "ctx", None)
        if isinstance(exc, click.UsageError) and ctx is not None:
            message += f" (see '{ctx.command_path} --help')"
        click.echo(f"jobctl: error: {message}", err=True)
        code = int(ExitCode.USAGE) if exc.exit_code == 2 else exc.exit_code
    except JobctlError as exc:
        code = _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        code = _fail("interrupted", ExitCode.INTERRUPTED)
    except BrokenPipeError:
        code = int(ExitCode.OK)
    except Exception as exc:  # last resort: still one line, never a traceback
        from ..connection import translate

        session = _SESSIONS[-1] if _SESSIONS else None
        err = translate(exc, session._target if session else None)
        if isinstance(err, JobctlError):
            code = _fail(str(err), err.exit_code)
        else:
            code = _fail(f"internal error: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                         ExitCode.FAILURE)
    _SESSIONS.clear()
    _end_startup(freeze=False)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    main()
