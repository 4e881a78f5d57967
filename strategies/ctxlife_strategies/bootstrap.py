"""``bootstrap``: preload what an agent must know into its system prompt.

What it does, its options and why: docs/strategies/bootstrap.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field

import ctxlife

_VARIABLE_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def render(template: str, variables: dict[str, str]) -> str:
    """Replace ``{name}`` for the known variables; leave every other brace untouched."""
    return _VARIABLE_RE.sub(lambda m: str(variables[m.group(1)]) if m.group(1) in variables else m.group(0), template)


class Bootstrap(ctxlife.Strategy):
    """Inject a profile, rules or any text into the system prompt of some or all agents."""

    name = "bootstrap"

    class Options(ctxlife.Options):
        text: str = Field(
            "",
            description="Inline text to inject. May use {agent_role}, {session_id} and {date}.",
        )
        files: list[ctxlife.NonBlankStr] = Field(
            default_factory=list,
            description=(
                "Markdown or text files to inject after the text, in order. Relative paths are "
                "relative to the config file's directory (the working directory without a file)."
            ),
        )
        agents: list[ctxlife.NonBlankStr] = Field(
            default_factory=list,
            description="Roles of the agents to inject into (case-insensitive). Empty: every agent.",
        )

    options: Options

    def __init__(
        self, options: Bootstrap.Options | None = None, settings: ctxlife.SharedSettings | None = None
    ) -> None:
        super().__init__(options, settings)
        opts = self.options
        self.base_dir, where = _base_dir(self.settings)
        parts = [opts.text.strip()] if opts.text.strip() else []
        self.paths: list[Path] = []
        for name in opts.files:
            path = Path(name).expanduser()
            if not path.is_absolute():
                path = self.base_dir / path
            if not path.is_file():
                raise ctxlife.ConfigError(
                    f"strategy 'bootstrap': file {name!r} does not exist (looked for {path}, "
                    f"relative to {where}); fix the path in files or create the file"
                )
            try:
                content = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ctxlife.ConfigError(f"strategy 'bootstrap': cannot read file {path}: {exc}") from None
            self.paths.append(path)
            if content.strip():
                parts.append(content.strip())
        if not parts:
            raise ctxlife.ConfigError(
                "strategy 'bootstrap' has nothing to inject: set text and/or files in its [bootstrap] table"
                + (" (the files are empty)" if opts.files else "")
            )
        self.template = "\n\n".join(parts)
        self._roles = {role.strip().casefold() for role in opts.agents}

    def applies_to(self, agent_role: str | None) -> bool:
        """Whether this agent gets the text (every agent when ``agents`` is empty)."""
        if not self._roles:
            return True
        return agent_role is not None and agent_role.strip().casefold() in self._roles

    @ctxlife.hookimpl
    def ctxlife_bootstrap(self, ctx: ctxlife.BootstrapContext) -> None:
        if not self.template or not self.applies_to(ctx.agent_role):
            return
        variables = {"agent_role": ctx.agent_role or "", "session_id": ctx.session_id or "", "date": ""}
        variables.update(ctx.variables)
        text = render(self.template, variables)
        ctx.blocks.append(text)
        ctx.record("injected", tokens=ctx.tokens.count_text(text), files=len(self.paths))


def _base_dir(settings: ctxlife.SharedSettings) -> tuple[Path, str]:
    """Where relative file names are looked up: the config file's directory, else the working directory."""
    if settings.config_dir is not None:
        return settings.config_dir, f"the config file's directory {settings.config_dir}"
    cwd = Path.cwd()
    return cwd, f"the working directory {cwd} (the settings do not come from a file)"
