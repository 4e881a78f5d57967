"""The tutorial's third-party plugin (docs/examples/ctxlife-redact), installed with pip like a user would."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

import ctxlife
from ctxlife.testing import react_action, react_final, scripted_llm

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2


def test_the_example_is_installed_as_its_own_distribution_and_listed():
    dist = importlib.metadata.distribution("ctxlife-redact")
    assert dist.version == "1.0.0"
    listed = subprocess.run(
        [sys.executable, "-m", "ctxlife.cli", "strategies", "--json"], capture_output=True, text=True, check=True
    )
    row = next(r for r in json.loads(listed.stdout) if r["name"] == "redact")
    assert row["package"] == "ctxlife-redact" and set(row["hooks"]) == {
        "ctxlife_before_llm_call",
        "ctxlife_after_tool_call",
        "ctxlife_filter_text",
    }


@pytest.mark.e2e
@pytest.mark.imports("crewai")
def test_the_example_runs_from_a_toml_config_on_a_real_crew(tmp_path):
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["redact"]\n\n[redact]\nkinds = ["github_token", "password_assignment"]\n')

    @tool("read_env")
    def read_env(name: str) -> str:
        """Read the project's environment file."""
        return f"GITHUB_TOKEN={SECRET}\npassword = hunter2hunter2\nREGION=eu-west-1"

    llm = scripted_llm([react_action("read_env", {"name": ".env"}), react_final("The region is eu-west-1.")])
    agent = Agent(
        role="Ops", goal="read config", backstory="You read config files.", llm=llm, tools=[read_env], verbose=False
    )
    task = Task(description=f"Check the .env file; my token is {SECRET}.", expected_output="the region", agent=agent)
    crew = ctxlife.wrap(Crew(agents=[agent], tasks=[task], verbose=False), config)
    assert crew.kickoff().raw == "The region is eu-west-1."
    sent = json.dumps(llm.calls)
    assert SECRET not in sent and "hunter2hunter2" not in sent
    assert "[REDACTED:github_token]" in sent and "eu-west-1" in sent
