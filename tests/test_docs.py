"""The docs stay true to the code: generated references are current, links resolve, examples load."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from ctxlife import hookspecs
from ctxlife.cli import build_parser, docgen
from ctxlife.config import load_settings, settings_from_dict
from ctxlife.plugins import registry

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def test_generated_references_are_current():
    for path, text in docgen.generate(DOCS).items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `python -m ctxlife.cli.docgen docs`"


def _commands(parser=None):
    """Every (sub)command parser of ``ctxlife``, the top-level one first."""
    parser = parser or build_parser()
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)


def test_the_cli_reference_shows_what_each_command_s_help_prints():
    """docs/cli.md (generated, and current: the test above) holds, for every command, the texts and
    placeholders its --help prints: a help text, description or metavar changed in the parser
    changes the page."""
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    commands = list(_commands())
    assert len(commands) == 15, [c.prog for c in commands]  # ctxlife, its 7 commands, session's 6, store's 1
    for parser in commands:
        section = re.search(rf"^## `{re.escape(parser.prog)}`\n(.*?)(?=^## |\Z)", page, re.S | re.M)
        assert section, f"docs/cli.md has no section for {parser.prog}"
        parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100_000)  # no line breaks
        printed = " ".join(parser.format_help().split())
        texts = [parser.description or ""]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                texts += [choice.help for choice in action._choices_actions]
            elif not isinstance(action, argparse._HelpAction):
                texts.append(action.help)
                # the long form: Python 3.13 prints "-o, --output FILE" where 3.11 prints "-o FILE, --output FILE"
                texts.append(docgen._shown(action, action.option_strings[-1] if action.option_strings else ""))
        for text in filter(None, texts):
            assert " ".join(text.split()) in printed, f"{parser.prog} --help does not print {text!r}"
            assert text.replace("|", "\\|") in section.group(1), f"docs/cli.md's {parser.prog} lacks {text!r}"


@pytest.mark.parametrize("hook", hookspecs.HOOK_NAMES)
def test_every_hookspec_has_a_reference_section_with_its_signature(hook):
    text = (DOCS / "hooks.md").read_text(encoding="utf-8")
    section = re.search(rf"^## `{hook}`\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, f"docs/hooks.md has no section for {hook}"
    assert f"def {docgen.hook_signature(hook)}" in section.group(1)
    assert len(section.group(1)) > 300, f"the reference of {hook} is too thin"


@pytest.mark.parametrize("name", [n for n in registry().names() if registry().entries[n].package == "ctxlife"])
def test_every_first_party_strategy_has_a_page_linked_from_the_index(name):
    page = DOCS / "strategies" / f"{name}.md"
    assert page.is_file(), f"missing {page}"
    assert f"strategies/{name}.md" in (DOCS / "index.md").read_text(encoding="utf-8")
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for field in registry().get(name).Options.model_fields:
        assert f"| `{field}` |" in configuration, f"option {name}.{field} is missing from docs/configuration.md"


def _markdown_files():
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to missing {target}"


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_toml_examples_in_the_docs_are_valid_configs(page):
    for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        data = tomllib.loads(block)
        if "tool" in data or "project" in data:
            continue  # a pyproject.toml excerpt
        if "strategies" in data or any(isinstance(v, dict) for v in data.values()):
            settings_from_dict(data, source=str(page))


@pytest.mark.parametrize("config", sorted((REPO / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_shipped_configs_load(config):
    assert load_settings(config).strategies
