"""The docs stay true to the code: generated references are current, links resolve, examples load."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ctxlife import docgen, hookspecs
from ctxlife.config import load_settings, settings_from_dict
from ctxlife.plugins import registry

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def test_generated_references_are_current():
    for path, text in docgen.generate(DOCS).items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `python -m ctxlife.docgen docs`"


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
