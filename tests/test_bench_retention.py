"""bench_retention's metric definitions on hand-made inputs: what counts as kept, equal budget, validity, cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_retention as br  # noqa: E402 - the benchmark under test
import grading  # noqa: E402
import peers  # noqa: E402

SYSTEM = {"role": "system", "content": "You help with accounts."}


def call(call_id, name, **args):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def result(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


class Fixed:
    """A method that sends the history minus the messages at ``drop`` (indices into the recording)."""

    def __init__(self, drop=(), name="fixed"):
        self.drop = set(drop)
        self.name = name

    def call(self, history, budget, when):
        return [m for i, m in enumerate(history) if i not in self.drop]


def chat_episode():
    messages = [
        SYSTEM,
        {"role": "user", "content": "My locker code is 4471-B, keep it in mind."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the server cross the road?"},
        {"role": "user", "content": "What was my locker code?"},
        {"role": "assistant", "content": "It was 4471-B."},
    ]
    need = grading.Need(6, (("4471-B",),), "answers", "locker")
    return br.Episode("test", "chat", messages, [need])


def run(episode, method, budgets=None, strict=False):
    tally, sent = br.replay(episode, method, peers.Meter(), grading.TextCache(), budgets, strict=strict)
    return tally, sent


# -- "in the context" ----------------------------------------------------------------------------


def test_present_ignores_case_and_whitespace_but_not_word_boundaries():
    text = grading.normalize("Locker  CODE 4471-b\nand ticket INC0013046 and code 13046")
    assert grading.present("locker code", text)
    assert grading.present("4471-B", text)
    assert not grading.present("3046", text)  # only inside longer numbers
    assert grading.present("13046", text)
    assert not grading.present("ticket INC001", text)


def test_present_in_cjk_text_needs_no_spaces():
    assert grading.present("科幻电影", grading.normalize("我昨天看了一部科幻电影，很好看"))
    assert not grading.present("科幻小说", grading.normalize("我昨天看了一部科幻电影"))


def test_values_in_tool_call_arguments_count_as_in_the_context():
    text = grading.message_text(call("c1", "lookup", user_id="mia_7"))
    assert grading.present("mia_7", text) and grading.present("lookup", text)


# -- retention --------------------------------------------------------------------------------------


def test_a_method_that_drops_the_message_holding_the_answer_scores_zero():
    episode = chat_episode()
    keeps, _ = run(episode, Fixed())
    drops, _ = run(episode, Fixed(drop={1}))
    assert keeps.needs["answers"][:2] == [1, 1]
    assert drops.needs["answers"][:2] == [1, 0]
    assert drops.as_dict()["retention"]["answers"]["share"] == 0.0


def test_the_answer_given_at_the_call_itself_does_not_count():
    # The need is at the call that writes message 6: the reply "It was 4471-B." is not sent to that call.
    episode = chat_episode()
    dropped_all_but_reply, _ = run(episode, Fixed(drop={1, 2, 3, 4}))
    assert dropped_all_but_reply.needs["answers"][:2] == [1, 0]


def test_reused_arguments_are_values_seen_earlier_outside_the_system_prompt():
    messages = [
        {"role": "system", "content": "Airline policy. Default cabin: economy."},
        {"role": "user", "content": "I'm user mia_li_7 and I want economy. Reservation ZQ81X."},
        call("c1", "get_user", user_id="mia_li_7"),
        result("c1", json.dumps({"reservations": ["ZQ81X", "PP2A"]})),
        {"role": "assistant", "content": "Found you."},
        {"role": "user", "content": "Cancel it."},
        call("c2", "cancel", reservation_id="ZQ81X", cabin="economy", reason="no", code="NEW9999", ok=True),
        result("c2", "done"),
        {"role": "assistant", "content": "Cancelled."},
    ]
    needs = grading.reused_argument_needs(messages)
    assert [(n.call, n.groups) for n in needs] == [(2, (("mia_li_7",),)), (6, (("ZQ81X",),))]
    # economy: in the system prompt; "no": too short; NEW9999: never seen before; True: a boolean


def test_reused_arguments_kept_only_when_the_value_is_in_what_was_sent():
    messages = [
        SYSTEM,
        {"role": "user", "content": "Check order ORD-5521 please."},
        call("c1", "get_order", order="ORD-5521"),
        result("c1", "shipped"),
        {"role": "assistant", "content": "It shipped."},
        {"role": "user", "content": "Refund it."},
        call("c2", "refund", order="ORD-5521"),
        result("c2", "ok"),
        {"role": "assistant", "content": "Refunded."},
    ]
    episode = br.Episode("test", "orders", messages, grading.reused_argument_needs(messages))
    assert [n.call for n in episode.needs] == [2, 6]
    everything, _ = run(episode, Fixed())
    assert everything.needs["reused args"][:2] == [2, 2]
    forgetful, _ = run(episode, Fixed(drop={1}))  # the user turn that gave the order number
    assert forgetful.needs["reused args"][:2] == [2, 1]  # call 6 still has it in call 2's arguments
    assert forgetful.misses["reused args"] == ["orders:2:ORD-5521"]


# -- equal budget ------------------------------------------------------------------------------------


def test_a_method_over_its_budget_is_flagged_and_strict_mode_raises():
    episode = chat_episode()
    meter = peers.Meter()
    sizes = {k: meter.messages(episode.messages[:k]) for k in episode.calls()}
    budgets = {k: n for k, n in sizes.items()}
    budgets[6] = sizes[6] - 1  # one token short at the last call
    tally, _ = run(episode, Fixed(), budgets)
    assert tally.over_budget_calls == 1 and tally.over_budget_max == 1
    with pytest.raises(br.OverBudget, match="budget"):
        run(episode, Fixed(), budgets, strict=True)
    within, _ = run(episode, Fixed(), sizes, strict=True)
    assert within.over_budget_calls == 0


def test_baselines_stay_within_the_budget_and_never_orphan_a_tool_result():
    messages = [SYSTEM]
    for i in range(8):
        messages += [
            {"role": "user", "content": f"Look up record {i}."},
            call(f"c{i}", "lookup", record=i),
            result(f"c{i}", "field " * 120 + f"value-{i}"),
            {"role": "assistant", "content": f"Record {i} found."},
        ]
    meter = peers.Meter()
    for peer in (peers.RecentFit(meter), peers.RecentFirstUser(meter)):
        for budget in (60, 150, 300, 500):
            context = peer.call(messages, budget)
            assert meter.messages(context) <= budget, (peer.name, budget)
            assert grading.invalid_codes(context) == [], (peer.name, budget)
    first = peers.RecentFirstUser(meter).call(messages, 400)
    assert first[1]["content"] == "Look up record 0."


def test_trim_messages_as_documented_stays_within_the_budget():
    pytest.importorskip("langchain_core")
    episode = br.tau_episodes(50)[0]
    meter = peers.Meter()
    trim = peers.Trim(meter, counter="tiktoken")
    for k in episode.calls():
        history = episode.messages[:k]
        budget = max(1_400, meter.messages(history) // 2)
        context = trim.call(history, budget)
        assert meter.messages(context) <= budget
        assert grading.invalid_codes(context) == []
        assert context[0]["role"] == "system"


def test_invalid_sequences_are_counted():
    ok = [SYSTEM, {"role": "user", "content": "hi"}, call("c1", "f", a=1), result("c1", "x")]
    assert grading.invalid_codes(ok) == []
    assert grading.invalid_codes([SYSTEM, result("c1", "x")]) == ["tool result without its call"]
    assert grading.invalid_codes([SYSTEM, call("c1", "f", a=1), {"role": "user", "content": "hi"}]) == [
        "tool call without its result"
    ]


# -- the prompt-cache view --------------------------------------------------------------------------


def test_cached_prefix_is_the_run_of_unchanged_leading_messages():
    a = [SYSTEM, {"role": "user", "content": "one"}]
    assert br.cached_prefix([*a, {"role": "assistant", "content": "two"}], br._snapshot(a)) == 2
    rewritten = [SYSTEM, {"role": "user", "content": "summary of one"}]
    assert br.cached_prefix(rewritten, br._snapshot(a)) == 1
    edited = [dict(SYSTEM), a[1]]
    snapshot = br._snapshot(edited)
    edited[1]["content"] = "one, edited in place"
    assert br.cached_prefix(edited, snapshot) == 1


def test_cache_cost_counts_cached_tokens_at_a_discount():
    long_system = {"role": "system", "content": "policy " * 1_500}
    messages = [long_system]
    for i in range(3):
        messages += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    episode = br.Episode("test", "cache", messages)
    growing, _ = run(episode, Fixed())
    stats = growing.as_dict()
    assert growing.cached_tokens > 0 and stats["cached_share"] > 0.6
    assert stats["cost_per_session_90"] == round(growing.tokens - 0.9 * growing.cached_tokens)
    assert stats["cost_per_session_50"] > stats["cost_per_session_90"]

    class Rewrites:
        name = "rewrites"

        def call(self, history, budget, when):
            return [{"role": "system", "content": history[0]["content"] + f" v{len(history)}"}, *history[1:]]

    rewriting, _ = run(episode, Rewrites())
    assert rewriting.cached_tokens == 0
    assert rewriting.as_dict()["cost_per_session_90"] == rewriting.tokens


def test_a_prefix_under_the_provider_minimum_is_not_cached():
    short, _ = run(chat_episode(), Fixed())  # every call extends the previous one, but it is ~60 tokens long
    assert short.cached_tokens == 0


def test_meter_and_langchain_counter_agree():
    pytest.importorskip("langchain_core")
    from langchain_core.messages import convert_to_messages

    meter = peers.Meter()
    count = peers.langchain_counter(meter)
    for episode in br.tau_episodes(40):
        assert meter.messages(episode.messages) == count(convert_to_messages(episode.messages))


def test_the_fresh_domain_plants_each_value_once_before_it_is_needed():
    from gen_helpdesk import generate

    session = generate(3)
    assert len(session.needs) >= 10
    assert {n.kind.split(":")[0] for n in session.needs} == {"probe", "reuse"}
    texts = [grading.message_text(m) for m in session.messages]
    for need in session.needs:
        value = need.answers[0][0]
        where = [i for i in range(need.call) if grading.present(value, texts[i])]
        assert where and where[0] == need.origin, need
        asked = max(i for i in range(need.call) if session.messages[i]["role"] == "user")
        assert asked not in where and need.origin < asked  # not given again when it is needed
    assert generate(3).messages == session.messages  # deterministic for a seed
