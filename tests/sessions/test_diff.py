"""The edit script between the list the recorder last saw and the caller's list now (ctxlife.sessions.diff).

Each case is an edit a caller makes to its conversation between two calls; the script is what the
recorder writes for it. Mirror slots are 10, 20, 30, ...; caller positions 0, 1, 2, ...
"""

from __future__ import annotations

from ctxlife.sessions.diff import Script, common_prefix, edit_script
from ctxlife.sessions.records import ADD, REMOVE, REPLACE


def mirror(texts: str) -> list[tuple[int, str]]:
    return [(10 * (i + 1), fp) for i, fp in enumerate(texts)]


def caller(texts: str) -> list[tuple[int, str]]:
    return list(enumerate(texts))


def script(before: str, now: str, **kwargs: object) -> Script:
    seen = mirror(before)
    return edit_script(seen, caller(now), [], {slot: i for i, (slot, _) in enumerate(seen)}, **kwargs)  # type: ignore[arg-type]


def edits(s: Script) -> list[tuple[str, int | None, int]]:
    return [(e.op, e.target, e.index) for e in s.edits]


def test_the_common_prefix_is_found_at_any_place_and_length():
    long = list(range(100))
    for at in (0, 1, 37, 63, 99):
        changed = long[:at] + [-1] + long[at + 1 :]
        assert common_prefix(long, changed) == at
    assert common_prefix(long, long) == 100
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([1, 2, 3], [1, 2]) == 2
    assert common_prefix([], [1]) == 0


def test_a_difference_declared_the_same_lets_the_prefix_run_on_to_the_next_one():
    a = list(range(10))
    b = [0, 1, 2, -3, 4, 5, 6, -7, 8, 9]
    assert common_prefix(a, b, lambda i: i == 3) == 7
    assert common_prefix(a, b, lambda i: i in (3, 7)) == 10
    assert common_prefix(a, b, lambda i: False) == 3
    adjacent = [0, 1, 2, -3, -4, 5]
    assert common_prefix(list(range(6)), adjacent, lambda i: i == 3) == 4


def test_appended_messages_are_adds_at_the_end_and_the_rest_keeps_its_slots():
    s = script("ab", "abc")
    assert edits(s) == [(ADD, None, 2)]
    assert s.slots == {0: 10, 1: 20}
    assert s.related and s.shared == 2


def test_a_message_inserted_in_the_middle_goes_after_the_one_before_it():
    assert edits(script("ab", "axb")) == [(ADD, 10, 1)]


def test_an_edited_earlier_message_is_replaced_in_its_slot():
    s = script("abc", "aBc")
    assert edits(s) == [(REPLACE, 20, 1)]
    assert s.slots == {0: 10, 1: 20, 2: 30}
    assert s.shared == 2


def test_a_regenerated_reply_replaces_the_last_one():
    s = script("ab", "ax")
    assert edits(s) == [(REPLACE, 20, 1)]
    assert s.shared == 1


def test_deleted_and_popped_messages_are_removed():
    assert edits(script("abc", "ac")) == [(REMOVE, 20, -1)]
    assert edits(script("abc", "ab")) == [(REMOVE, 30, -1)]
    assert script("abc", "ac").slots == {0: 10, 1: 30}


def test_two_messages_for_one_replace_it_and_add_the_other_after_it():
    assert edits(script("abc", "aXYc")) == [(REPLACE, 20, 1), (ADD, 20, 2)]


def test_a_caller_keeping_only_the_tail_removes_nothing_before_it():
    s = script("abcd", "cde")
    assert edits(s) == [(ADD, None, 2)]
    assert s.slots == {0: 30, 1: 40}


def test_text_a_caller_puts_before_the_whole_conversation_is_not_recorded():
    s = script("ab", "xab")
    assert edits(s) == []
    assert s.slots == {1: 10, 2: 20}


def test_a_message_that_cannot_be_the_same_one_edited_is_removed_and_the_new_one_added():
    s = script("ab", "ax", same_kind=lambda slot, index: False)
    assert edits(s) == [(REMOVE, 20, -1), (ADD, None, 1)]
    assert script("ab", "ax", same_kind=lambda slot, index: slot == 20 and index == 1).edits[0].op == REPLACE


def test_the_stores_view_as_mirror_removes_nothing_and_replaces_only_one_for_one():
    assert edits(script("abc", "ac", removals=False)) == []
    assert edits(script("abc", "aXc", removals=False)) == [(REPLACE, 20, 1)]
    # two messages where one was: before the view's last messages they are adds, nothing replaced
    assert edits(script("abc", "aXYc", removals=False)) == [(ADD, 10, 1), (ADD, 10, 2)]
    # at the view's end a replacement is what it looks like
    assert edits(script("abc", "aXY", removals=False)) == [(REPLACE, 20, 1), (REPLACE, 30, 2)]


def test_lists_that_share_no_message_are_unrelated():
    s = script("ab", "xy")
    assert not s.related
    assert s.shared == 0


def test_messages_of_the_view_the_mirror_lacks_are_not_new_between_the_same_neighbours():
    order = {10: 0, 20: 1, 30: 2, 40: 3}
    hidden = [(20, "b"), (30, "c")]
    s = edit_script([(10, "a"), (40, "d")], caller("abcd"), hidden, order)
    assert s.edits == []
    assert s.slots == {0: 10, 1: 20, 2: 30, 3: 40}
    # after d, b is not the evicted b (that one lies between a and d): it is new
    s = edit_script([(10, "a"), (40, "d")], caller("adb"), hidden, order)
    assert edits(s) == [(ADD, None, 2)]
    # a hidden message is the caller's once: the second b is new, after the first
    s = edit_script([(10, "a"), (40, "d")], caller("abbd"), hidden, order)
    assert edits(s) == [(ADD, 20, 2)]
    assert s.slots == {0: 10, 1: 20, 3: 40}


def test_the_same_message_sent_again_is_a_new_message():
    # a shared {"role": "user", "content": "continue"} appended twice (issue 26)
    assert edits(script("a", "aa")) == [(ADD, None, 1)]
    s = script("aa", "a")
    assert edits(s) == [(REMOVE, 20, -1)]
    assert s.slots == {0: 10}


def test_a_message_inserted_while_the_last_one_is_popped():
    s = script("abc", "aXb")
    assert edits(s) == [(REMOVE, 30, -1), (ADD, 10, 1)]
    assert s.slots == {0: 10, 2: 20}


def test_one_message_for_two_replaces_the_first_and_removes_the_other():
    s = script("abcd", "aXd")
    assert edits(s) == [(REPLACE, 20, 1), (REMOVE, 30, -1)]
    assert s.slots == {0: 10, 1: 20, 2: 40}


def test_an_edited_run_replaces_message_for_message_while_the_roles_agree():
    roles = {10: "user", 20: "assistant", 30: "tool", 40: "user"}
    now = ["user", "assistant", "tool", "user"]
    s = script("abcd", "aXYd", same_kind=lambda slot, index: roles[slot] == now[index])
    assert edits(s) == [(REPLACE, 20, 1), (REPLACE, 30, 2)]
    assert s.slots == {0: 10, 1: 20, 2: 30, 3: 40}
    now[2] = "user"  # the tool result became a user message: not an edit of it
    s = script("abcd", "aXYd", same_kind=lambda slot, index: roles[slot] == now[index])
    assert edits(s) == [(REPLACE, 20, 1), (REMOVE, 30, -1), (ADD, 20, 2)]


def test_hundreds_of_equal_messages_between_two_edits_keep_their_slots():
    before = ["first"] + ["continue"] * 250 + ["last"]
    seen = [(10 * (i + 1), fp) for i, fp in enumerate(before)]
    now = ["FIRST"] + ["continue"] * 250 + ["LAST"]
    s = edit_script(seen, list(enumerate(now)), [], {slot: i for i, (slot, _) in enumerate(seen)})
    assert edits(s) == [(REPLACE, 10, 0), (REPLACE, 2520, 251)]


def test_a_view_message_is_found_wherever_it_lies_between_the_neighbours():
    # the evicted b is the view's last message; a candidate that differs is passed over
    s = edit_script([(10, "a")], caller("ab"), [(20, "b")], {10: 0, 20: 1})
    assert s.edits == [] and s.slots == {0: 10, 1: 20}
    s = edit_script([(10, "a")], caller("ab"), [(20, "x"), (30, "b")], {10: 0, 20: 1, 30: 2})
    assert s.edits == [] and s.slots == {0: 10, 1: 30}
    s = edit_script(mirror("ab"), caller("abc"), [(30, "c")], {10: 0, 20: 1, 30: 2})
    assert s.edits == [] and s.slots == {0: 10, 1: 20, 2: 30}


class PlacedHidden:
    """A Hidden that reads the view's messages by place, as the recorder's does (no list to sort)."""

    def __init__(self, view: list[tuple[int, str]], shown: set[int]) -> None:
        self.view, self.shown, self.asked = view, shown, []

    def between(self, low, high):
        self.asked.append((low, high))
        for place in range(max(low + 1, 0), min(high, len(self.view))):
            slot, fp = self.view[place]
            if slot not in self.shown:
                yield place, slot, fp


def test_hidden_messages_found_by_place_map_as_a_list_of_them_does():
    view = [(10, "a"), (20, "x"), (30, "b"), (40, "c")]
    order = {slot: i for i, (slot, _) in enumerate(view)}
    hidden = PlacedHidden(view, {10})
    s = edit_script([(10, "a")], caller("abc"), hidden, order)
    assert s.edits == [] and s.slots == {0: 10, 1: 30, 2: 40}
    assert s.slots == edit_script([(10, "a")], caller("abc"), [(20, "x"), (30, "b"), (40, "c")], order).slots
    assert hidden.asked and all(low >= 0 for low, _ in hidden.asked)  # read from after the mapped a only


def test_a_view_message_after_a_later_neighbour_is_not_the_callers_new_one():
    # c was written after b; the caller's c before b is its own new message
    s = edit_script(mirror("ab"), caller("acb"), [(30, "c")], {10: 0, 20: 1, 30: 2})
    assert edits(s) == [(ADD, 10, 1)]
    assert s.slots == {0: 10, 2: 20}


def test_a_mirror_message_gone_from_the_view_does_not_bound_the_search():
    # x (slot 15) is no longer in the view (removed by another writer)
    s = edit_script([(10, "a"), (15, "x"), (20, "b")], caller("axbc"), [(30, "c")], {10: 0, 20: 1, 30: 2})
    assert s.edits == [] and s.slots == {0: 10, 1: 15, 2: 20, 3: 30}


def test_parallel_results_the_view_holds_in_another_order_are_found_not_added_again():
    # The view holds a call (slot 30) and its results in completion order: 46 (40), 45 (50), 47 (60); the mirror
    # predates them all. The caller's run comes in call-id order (the recorder sorts each run so): 45, 46, 47.
    # Each is the view's own result: 46 lies before 45 in the view, yet in the same run of results.
    view = [(10, "u"), (20, "a"), (30, "c"), (40, "r46"), (50, "r45"), (60, "r47"), (70, "d")]
    order = {slot: i for i, (slot, _) in enumerate(view)}
    now = [(0, "u"), (1, "a"), (2, "c"), (3, "r45"), (4, "r46"), (5, "r47"), (6, "d"), (7, "new")]
    results = {3, 4, 5}
    s = edit_script([(10, "u"), (20, "a")], now, view[2:], order, movable=results.__contains__)
    assert edits(s) == [(ADD, None, 7)]  # only the new message: none of the results is written again
    assert s.slots == {0: 10, 1: 20, 2: 30, 3: 50, 4: 40, 5: 60, 6: 70}
    # Without knowing which are results, a message found out of order stays the caller's own (as before).
    plain = edit_script([(10, "u"), (20, "a")], now, view[2:], order)
    assert (ADD, 50, 4) in edits(plain)


def test_a_result_is_found_only_within_its_own_run():
    # r45 is in the view, but before the user message u2 that the caller's run follows: not the same run.
    view = [(10, "u"), (20, "r45"), (30, "u2"), (40, "c")]
    order = {slot: i for i, (slot, _) in enumerate(view)}
    now = [(0, "u"), (1, "u2"), (2, "c"), (3, "r45")]
    s = edit_script([(10, "u")], now, view[1:], order, movable={3}.__contains__)
    assert edits(s) == [(ADD, None, 3)]


def _roles(mirror_roles: dict[int, str], caller_roles: dict[int, str]):
    return lambda slot, index: mirror_roles[slot] == caller_roles[index]


def test_the_views_last_question_is_replaced_by_the_callers_after_what_a_compaction_evicted():
    # The store's view (not a list the caller held: removals=False) is the task's first message and question 29;
    # the caller holds what the compaction evicted (r0, q1, r1), a message of its own among it (x), then its edited
    # question 29, the reply and a new question. The edited question replaces 29 (not x, not q1).
    view = [(10, "u0"), (20, "r0"), (30, "q1"), (40, "r1"), (290, "q29")]
    order = {slot: i for i, (slot, _) in enumerate(view)}
    now = [(0, "u0"), (1, "r0"), (2, "q1"), (3, "x"), (4, "r1"), (5, "q29'"), (6, "r29"), (7, "q30")]
    roles = _roles(
        {10: "user", 20: "assistant", 30: "user", 40: "assistant", 290: "user"},
        dict(enumerate(["user", "assistant", "user", "user", "assistant", "user", "assistant", "user"])),
    )
    s = edit_script([(10, "u0"), (290, "q29")], now, view[1:4], order, removals=False, same_kind=roles)
    assert edits(s) == [(REPLACE, 290, 5), (ADD, 30, 3), (ADD, None, 6), (ADD, None, 7)]
    assert s.slots == {0: 10, 1: 20, 2: 30, 4: 40, 5: 290}


def test_the_views_last_message_is_replaced_only_by_a_new_message_of_its_role():
    # Nothing evicted: the caller's next new message is a reply, not a question: question 29 is not replaced.
    roles = _roles({10: "user", 290: "user"}, {0: "user", 1: "assistant", 2: "user"})
    order = {10: 0, 290: 1}
    s = edit_script([(10, "u0"), (290, "q29")], caller(["u0", "a", "q"]), [], order, removals=False, same_kind=roles)
    assert edits(s) == [(ADD, None, 1), (ADD, None, 2)]
    # The view's last two messages: the reply is replaced by the caller's, the question (next new one a reply) is not.
    view = [(10, "u0"), (20, "q1"), (280, "a28"), (290, "q29")]
    order = {slot: i for i, (slot, _) in enumerate(view)}
    roles = _roles(
        {10: "user", 20: "user", 280: "assistant", 290: "user"}, {0: "user", 1: "user", 2: "assistant", 3: "assistant"}
    )
    s = edit_script(
        [(10, "u0"), (280, "a28"), (290, "q29")], caller(["u0", "q1", "a28'", "r29"]), view[1:2], order,
        removals=False, same_kind=roles,
    )  # fmt: skip
    assert edits(s) == [(REPLACE, 280, 2), (ADD, None, 3)]
    assert s.slots == {0: 10, 1: 20, 2: 280}


def test_the_views_last_reply_edited_after_what_a_compaction_evicted_is_replaced_by_the_edit():
    # Before, a caller message of the reply's role was paired by position before what the compaction evicted was
    # mapped back: reply 28 took the evicted r0's text and the evicted q1 was added again.
    # The store's view: the task's first message and reply 28 (recorded with record_reply); the caller holds the
    # evicted r0 and q1, then its regenerated reply 28.
    view = [(10, "u0"), (20, "r0"), (30, "q1"), (280, "a28")]
    order = {slot: i for i, (slot, _) in enumerate(view)}
    roles = _roles(
        {10: "user", 20: "assistant", 30: "user", 280: "assistant"},
        {0: "user", 1: "assistant", 2: "user", 3: "assistant"},
    )
    s = edit_script(
        [(10, "u0"), (280, "a28")],
        caller(["u0", "r0", "q1", "a28'"]),
        view[1:3],
        order,
        removals=False,
        same_kind=roles,
    )
    assert edits(s) == [(REPLACE, 280, 3)]
    assert s.slots == {0: 10, 1: 20, 2: 30, 3: 280}
