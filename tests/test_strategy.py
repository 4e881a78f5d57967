"""ctxlife.Strategy: typed options, what the host hands a strategy, and strategies written against the old API."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

import ctxlife
from ctxlife.config import load_settings, settings_from_dict
from ctxlife.errors import PluginError
from ctxlife.strategy import SharedSettings, create_strategy
from ctxlife.testing import assistant, user


class EchoOptions(ctxlife.Options):
    suffix: str = Field("!", description="appended")


class Echo(ctxlife.Strategy[EchoOptions]):
    name = "echo"

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        ctx.record("echo", suffix=self.options.suffix, threshold=self.settings.threshold)


class Nested(ctxlife.Strategy):
    name = "nested"

    class Options(ctxlife.Options):
        rounds: int = 3

    options: Options


class NoInit(ctxlife.Strategy):
    """Written before strategies were typed: no __init__, nested Options."""

    name = "no_init"

    class Options(ctxlife.Options):
        n: int = 1


class OldInit(ctxlife.Strategy):
    """Written against the old API: __init__(options=None, settings=None), reads settings.threshold."""

    name = "old_init"

    def __init__(self, options=None, settings=None):  # noqa: ANN001 - the old, untyped style
        super().__init__(options, settings)
        self.threshold = settings.threshold if settings is not None else 0.4


def test_the_type_argument_becomes_the_options_class():
    assert Echo.Options is EchoOptions
    assert Echo().options == EchoOptions()
    assert Nested.Options.__qualname__ == "Nested.Options" and Nested().options.rounds == 3


def test_options_given_twice_differently_is_an_error():
    with pytest.raises(PluginError, match="keep one of them"):

        class Twice(ctxlife.Strategy[EchoOptions]):
            class Options(ctxlife.Options):
                other: int = 1


def test_strategies_receive_the_shared_settings_not_the_whole_configuration(
    tmp_path: Path, install_strategy, make_host
):
    install_strategy(Echo)
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["echo"]\nthreshold = 0.3\nagent_model = "gpt-4o"\n[echo]\nsuffix = "?"\n')
    settings = load_settings(config)
    host = ctxlife.Host(settings, context_window=1000)
    echo = host.strategies[0]
    assert isinstance(echo.settings, SharedSettings)
    assert echo.settings.threshold == 0.3 and echo.settings.agent_model == "gpt-4o"
    assert echo.settings.config_dir == tmp_path.resolve() and echo.settings.source == str(config)
    report = host.before_llm_call([user("hi"), assistant("hello")])
    assert report.actions[0].details == {"suffix": "?", "threshold": 0.3}


def test_reading_a_setting_a_strategy_is_not_given_names_what_it_gets():
    settings = settings_from_dict({"strategies": []}).shared()
    with pytest.raises(AttributeError, match=r"no settings\.strategies.*belong in its Options") as info:
        settings.strategies  # noqa: B018
    assert "threshold" in str(info.value) and "config_dir" in str(info.value)


@pytest.mark.parametrize("cls", [NoInit, OldInit])
def test_strategies_written_against_the_old_api_still_run(cls, install_strategy, make_host):
    install_strategy(cls)
    host = make_host([cls.name], threshold=0.35)
    strategy = host.strategies[0]
    assert isinstance(strategy.options, cls.Options)
    if cls is OldInit:
        assert strategy.threshold == 0.35


def test_an_init_that_cannot_take_options_and_settings_gets_a_clear_error():
    class Strict(ctxlife.Strategy):
        name = "strict"

        def __init__(self) -> None:
            super().__init__()

    with pytest.raises(PluginError, match=r"__init__ must accept \(options=None, settings=None\)"):
        create_strategy(Strict, Strict.Options(), SharedSettings())


def test_an_init_that_skips_super_gets_a_clear_error():
    class Forgetful(ctxlife.Strategy):
        name = "forgetful"

        def __init__(self, options=None, settings=None):  # noqa: ANN001
            self.ready = True

    with pytest.raises(PluginError, match=r"call super\(\)\.__init__\(options, settings\) first"):
        create_strategy(Forgetful, Forgetful.Options(), SharedSettings())


def test_ctx_tokens_is_never_none_inside_a_hook_and_names_the_fix_outside():
    ctx = ctxlife.LLMCallContext(messages=[user("hi")])
    with pytest.raises(ctxlife.CtxlifeError, match="set by the host"):
        ctx.tokens  # noqa: B018
