"""What the CLI says to a person: bare ``jobctl``, help text, confirmations."""

from __future__ import annotations

from helpers import cli


def test_bare_jobctl_prints_help_and_exits_0(capsys) -> None:
    code, out, err = cli(capsys)
    assert code == 0, err
    assert out.startswith("Usage: jobctl") and "redrive" in out and "Exit codes:" in out
    assert err == ""


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
#: Words of the project's own history that must not reach users ("seed 000",
#: "issue 14"); "startup nodes" and the demo's random --seed are fine.
_ORIGINS = __import__("re").compile(r"\bseed\s+\d|\bthe seed'?s?\b|\bissues?\s+\d", __import__("re").I)


def _help_texts():
    import click

    from jobctl.cli.main import cli as root

    def walk(group, path):
        ctx = click.Context(group, info_name=" ".join(path))
        yield " ".join(path), group.get_help(ctx)
        for name in getattr(group, "commands", {}):
            yield from walk(group.commands[name], [*path, name])

    yield from walk(root, ["jobctl"])


def test_no_origins_in_help_readme_or_docs() -> None:
    found = [f"{name}: {m.group(0)}" for name, text in _help_texts() for m in _ORIGINS.finditer(text)]
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found += [f"{path.name}: {m.group(0)}" for m in _ORIGINS.finditer(path.read_text())]
    assert not found


def test_every_readme_and_docs_link_is_inside_the_repository() -> None:
    import re

    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)", path.read_text()):
            if "://" in target:
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{path.name}: {target}"


def test_progress_bar_labels_counts_rate_elapsed_and_eta(capsys) -> None:
    from jobctl.cli import render

    update, stop = render.progress(30_000)
    update(4_560)
    stop()
    err = capsys.readouterr().err
    assert "4,560 of 30,000" in err and "jobs/s" in err and "elapsed " in err and "ETA " in err


def test_queue_names_complete_from_the_config(tmp_path) -> None:
    from click.shell_completion import ShellComplete

    from jobctl.cli.main import cli as root

    cfg = tmp_path / "jobctl.toml"
    cfg.write_text("[queues.email]\n[queues.emails-eu]\n[queues.billing]\n")
    comp = ShellComplete(root, {}, "jobctl", "_JOBCTL_COMPLETE")

    def names(args, incomplete):
        return [c.value for c in comp.get_completions(["--config", str(cfg), *args], incomplete)]

    assert names(["redrive"], "em") == ["email", "emails-eu"]
    assert names(["status"], "b") == ["billing"]
    assert names(["migrate", "email"], "") == ["email", "emails-eu", "billing"]
    assert names(["hold", "ls"], "e") == ["email", "emails-eu"]
    bad = tmp_path / "bad.toml"
    bad.write_text("[queues\n")
    assert [c.value for c in comp.get_completions(["--config", str(bad), "redrive"], "")] == []


def test_journal_table_shows_filters_as_typed() -> None:
    """Square brackets in a journaled filter or operator are text, not rich markup."""
    from rich.console import Console

    from jobctl.cli.admin_cmds import _journal_table

    e = {"operation": "redrive", "queue": "email", "ended_ms": 10 ** 12, "id": "redrive-1",
         "operator": "ops[bot]", "filter": 'error = "[bold]"'}
    con = Console(width=300, record=True)
    con.print(_journal_table([e], server=False))
    text = con.export_text()
    assert 'error = "[bold]"' in text and "ops[bot]" in text
