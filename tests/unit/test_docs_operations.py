"""The operating docs say what the commands do, and name only options that exist."""

from __future__ import annotations

import re
from pathlib import Path

import click

from stormish.cli import main

ROOT = Path(__file__).resolve().parents[2]


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def options() -> dict[str, set[str]]:
    """Each stormish command and the long options it takes."""
    out = {}
    for name, cmd in main.commands.items():
        out[name] = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    return out


def test_the_readme_tells_how_to_operate_a_cluster():
    ops = section((ROOT / "README.md").read_text(), "Operating a cluster")
    for needed in ("stormish logs", "--log-level", "-v", "--connect-timeout",
                   "--restart-backoff", "list --json", "monitor", "--json", "stormish ui",
                   "--metrics-port", "--ui-port", "--log-dir"):  # fmt: skip
        assert needed in ops, needed
    known = set().union(*options().values())
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", ops))
    assert named and not named - known, sorted(named - known)
    for cmd, opt in (("nimbus", "--ui-port"), ("nimbus", "--metrics-port"),
                     ("supervisor", "--log-dir"), ("run", "--log-dir"), ("submit", "--json"),
                     ("monitor", "--json"), ("list", "--json"), ("list", "--connect-timeout"),
                     ("ui", "--nimbus")):  # fmt: skip
        assert opt in options()[cmd], (cmd, opt)


def test_the_cluster_page_says_what_compose_publishes_and_how_to_reach_the_ui():
    text = (ROOT / "docs" / "cluster.md").read_text()
    compose = section(text, "Docker compose")
    assert "only nimbus's API port is published" not in compose
    assert "9090" in compose and "stormish ui --nimbus 127.0.0.1:6627 --keys ./keys" in compose
    published = (ROOT / "docker" / "compose.yaml").read_text()
    assert ':9090"' in published and ':6627"' in published and "--ui-port" not in published
    assert "web UI" not in section(text, "Not yet")
    assert "stormish ui --nimbus" in section(text, "Watching it: monitor, metrics, web UI")
