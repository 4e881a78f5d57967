"""Text in every script: facts inside CJK text, sentences at 。！？；, cuts that split nothing, lone surrogates."""

from __future__ import annotations

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.facts import extract_facts, facts_missing_from
from ctxlife.host import Host
from ctxlife.messages import is_summary
from ctxlife.summarizers import SummaryRequest, get_summarizer
from ctxlife.summarizers.candidates import sentences
from ctxlife.summarizers.rendering import truncate_to_tokens
from ctxlife.tokens import TokenCounter

COUNT = TokenCounter("gpt-4o").count_text

ISSUE_TEXT = "订单号是ORD-88231，退款申请RF-5521，邮箱zhang.wei@example.com，金额为￥1,299.00。"


def facts_of(text: str) -> dict[str, str | None]:
    return {f.text: f.normalized for f in extract_facts(text)}


def test_the_issue_sentence_gives_every_fact():
    # Before: nothing at all (\b never matches between a CJK character and a Latin letter).
    assert facts_of(ISSUE_TEXT) == {
        "ORD-88231": "ORD-88231",
        "RF-5521": "RF-5521",
        "zhang.wei@example.com": "zhang.wei@example.com",
        "￥1,299.00": "1299",
    }


@pytest.mark.parametrize(
    "text, expected",
    [
        ("请把预订HAT136改到2024年5月20日下午3点。", {"HAT136": "HAT136", "2024年5月20日": "2024-05-20"}),
        ("用户mia_li_3668的行李重量23kg，费用＄45。", {"mia_li_3668": "mia_li_3668", "23kg": "23 kg", "＄45": "45"}),
        (
            "发票在/data/invoices/ORD-48213.pdf里，链接https://example.com/r/991，请查看。",
            {
                "/data/invoices/ORD-48213.pdf": "/data/invoices/ORD-48213.pdf",
                "https://example.com/r/991": "https://example.com/r/991",
            },
        ),
        ("金额１２９９元，电话13800138000。", {"１２９９元": "1299", "13800138000": "13800138000"}),
        ("会议定在10：30，地点A座。", {"10：30": "10:30"}),
        ("予約番号はNO6JO3です。合計は¥12,000円。", {"NO6JO3": "NO6JO3", "¥12,000": "12000"}),
        ("주문 번호는ORD-77120입니다", {"ORD-77120": "ORD-77120"}),
        ("Заказ ORD-55120 оплачен", {"ORD-55120": "ORD-55120"}),
    ],
)
def test_facts_inside_cjk_and_other_scripts(text, expected):
    found = facts_of(text)
    for surface, normalized in expected.items():
        assert found.get(surface, "missing") == normalized, (surface, found)


def test_latin_words_still_need_their_boundaries():
    # The CJK rule must not make facts out of pieces of Latin words.
    assert "HAT136" not in facts_of("XHAT136Y is one token")
    assert facts_of("reference ABCD-1234x") == {} or "ABCD-1234" not in facts_of("reference ABCD-1234x")


def test_a_summary_keeps_chinese_facts_even_when_small():
    span = [
        {"role": "user", "content": ISSUE_TEXT + "请帮我查一下退款进度，并确认邮箱是否正确。"},
        {
            "role": "assistant",
            "content": "好的，我来查询。退款RF-5521正在处理中，预计三个工作日内到账！金额为￥1,299.00；邮箱已确认。",
        },
        {"role": "user", "content": "另外，我想把订单ORD-88231的收货地址改成上海市浦东新区世纪大道100号。可以吗？"},
        {
            "role": "assistant",
            "content": "可以，地址已更新为上海市浦东新区世纪大道100号。订单ORD-88231将于2024年5月20日发货。",
        },
    ]
    summarizer = get_summarizer("extractive")
    for budget in (40, 80, 200):
        text = summarizer.summarize(SummaryRequest(span, None, budget, COUNT, extract_facts(span)))
        assert text.strip(), f"empty summary at {budget} tokens"
        assert COUNT(text) <= budget
        if budget >= 80:
            missing = facts_missing_from(extract_facts(span), text)
            assert not [f for f in missing if f.kind in ("code", "email")], missing


def test_chinese_sentences_split_at_their_punctuation_and_line_breaks():
    text = "第一句话。第二句话！第三句？第四句；第五句\n第六句没有标点\n第七句"
    assert sentences(text) == ["第一句话。", "第二句话！", "第三句？", "第四句；", "第五句", "第六句没有标点", "第七句"]
    long = "这是一个非常长的句子，" * 40 + "订单ORD-88231已确认。"
    pieces = sentences(long, max_chars=60)
    assert all(len(p) <= 60 for p in pieces)
    assert any("ORD-88231" in p for p in pieces)  # never cut inside the code


def test_token_cuts_never_split_a_word_an_emoji_or_a_surrogate_pair():
    text = "Flight HAT136 👨\u200d👩\u200d👧\u200d👦 confirmed for zhang.wei@example.com " * 3
    for budget in range(3, 40):
        cut = truncate_to_tokens(text, budget, COUNT)
        body = cut.removesuffix("…").rstrip()
        assert COUNT(cut) <= budget
        assert text.startswith(body)
        tail = text[len(body) :]
        assert not body or not tail or not (body[-1].isalnum() and tail[0].isalnum()), repr(body[-10:])
        assert not body.endswith("\u200d") and not tail.startswith("\u200d")
    chinese = "订单号是ORD-88231，退款申请RF-5521。" * 5
    for budget in range(3, 30):
        body = truncate_to_tokens(chinese, budget, COUNT).removesuffix("…")
        assert not body.endswith(("ORD", "ORD-", "ORD-8823", "RF-55"))


def test_lone_surrogates_in_a_compacted_span_never_crash_or_leak_into_the_summary():
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "extractive", "min_gain_tokens": 0, "max_summary_tokens": 80},
        }
    )
    messages = [{"role": "system", "content": "s"}]
    for i in range(12):
        messages.append({"role": "user", "content": f"文件 report_{i}_\udcff.csv 的大小？" + "数据 " * 40})
        messages.append({"role": "assistant", "content": f"report_{i}_\udcff.csv 有 {i * 100} 行。"})
    report = Host(settings, context_window=800).manage(messages)
    assert report.failures == [] and "compacted" in [a.what for a in report.actions]
    summary = next(m for m in messages if is_summary(m))
    summary["content"].encode("utf-8")  # sendable


def test_cjk_through_manage_end_to_end():
    messages = [{"role": "user", "content": ISSUE_TEXT * 30}, {"role": "assistant", "content": "收到。"}] * 6
    messages.append({"role": "user", "content": "退款到哪一步了？"})
    report = ctxlife.manage(
        messages,
        config=settings_from_dict({"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}}),
        context_window=4000,
    )
    assert report.tokens_after < report.tokens_before and report.failures == []
    summary = next(m for m in messages if is_summary(m))
    for fact in ("ORD-88231", "RF-5521", "zhang.wei@example.com"):
        assert fact in summary["content"]


@pytest.mark.parametrize("max_summary_tokens", [32, 40, 60])
def test_a_small_chinese_summary_is_not_empty_and_keeps_the_ids(max_summary_tokens):
    # Before: "summarizer returned an empty summary" at 32 and 40 tokens (the span was truncated,
    # every fact lost), and no fact was found at any size.
    turn = (
        ISSUE_TEXT + "请帮我查一下退款进度，并确认邮箱是否正确。另外把收货地址改成上海市浦东新区世纪大道100号，谢谢。"
    )
    reply = "好的，退款RF-5521正在处理中，预计三个工作日内到账。地址已更新为上海市浦东新区世纪大道100号。"
    messages = [{"role": "system", "content": "你是客服助手。"}]
    for _ in range(8):
        messages += [{"role": "user", "content": turn}, {"role": "assistant", "content": reply}]
    messages.append({"role": "user", "content": "进度如何？"})
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": max_summary_tokens, "min_gain_tokens": 0},
        }
    )
    report = Host(settings, context_window=2000).manage(messages)
    (action,) = [a for a in report.actions if a.what in ("compacted", "truncated")]
    assert action.what == "compacted" and action.details["facts_found"] >= 3
    summary = next(m for m in messages if is_summary(m))["content"]
    for fact in ("ORD-88231", "RF-5521"):
        assert fact in summary


def test_task_scope_carries_outputs_with_lone_surrogates():
    from ctxlife.contexts import TaskContext

    settings = settings_from_dict({"strategies": ["task_scope"], "task_scope": {"max_tokens": 80}})
    host = Host(settings, context_window=8000)
    output = "清单：" + " ".join(f"report_{i}_\udcff.csv" for i in range(200))
    end = TaskContext(task_name="list", task_index=0, output=output)
    assert host.task_end(end).failures == []  # before: UnicodeEncodeError in the output's digest
    start = TaskContext(task_name="next", task_index=1, context_text=output)
    report = host.task_start(start)
    assert report.failures == [] and COUNT(start.context_text) <= 80
    start.context_text.encode("utf-8")
