"""Lessons: validation, the ready lesson, export/import, and the lesson store on both backends (SQLite and a
throwaway PostgreSQL cluster), including the room's current step a late joiner lands on and the shared drawings."""

from __future__ import annotations

import json

import pytest
from langs import CHINESE, ENGLISH

from dashboard.classroom import lessons as L
from dashboard.classroom import step_views
from dashboard.classroom import store as ps


def test_the_ready_lesson_has_the_chapters_pages_with_polls_between():
    lesson = L.ready()
    assert lesson["title"] == "Chapter 3 in 40 minutes"
    pages = [s["page"] for s in lesson["steps"] if s["kind"] == "view"]
    for page in ("walkthrough", "explore", "shape-flow", "masking-lab", "windows", "tiled"):
        assert page in pages
    methods = [s["params"].get("mask_method") for s in lesson["steps"] if s.get("page") == "explore"]
    assert methods == ["neg_inf", "renormalize"]  # Explore: −∞ vs renormalize
    kinds = [s["kind"] for s in lesson["steps"]]
    assert kinds.count("poll") >= 3 and kinds[0] == "view" and kinds[-1] == "view"
    assert "poll" not in {a for a, b in zip(kinds, kinds[1:]) if a == b}  # no two polls in a row
    for title in [lesson["title"]] + [s["title"] for s in lesson["steps"] if "title" in s]:
        assert title in step_views.READY_TITLES  # every shipped title is in the catalog


def test_every_ready_poll_is_provable_from_the_phones_picture():
    """A phone shows weights to 2 decimals: each "attends most" poll of the ready lesson must be answerable there
    (its first poll, on the book's near-uniform weights, asked to read 0.341 against 0.340)."""
    from attn_core.labs.questions import SHOWN_DECIMALS

    polls = [s for s in L.ready()["steps"] if s["kind"] == "poll" and s["question"] == "attends_most"]
    assert len(polls) >= 2
    for step in polls:
        q = step_views.question(step)
        assert q["proof"]["decimals"] == SHOWN_DECIMALS, (step, q["prompt"])


def test_every_ready_step_draws_and_reads_its_own_numbers():
    for step in L.ready()["steps"]:
        if step["kind"] == "poll":
            q = step_views.question(step)
            assert 2 <= len(q["choices"]) <= 8 and 0 <= q["answer"] < len(q["choices"])
            continue
        body = step_views.draw(step)
        assert "problem" not in body and ("spec" in body or "specs" in body), body  # specs: the split into heads
        assert body["reading"]
        if step["page"] == "masking-lab":
            assert "the same weights" in body["reading"]  # −∞ and renormalize agree to float error
        if step["page"] == "shape-flow":
            assert "attn_weights (1, 2, 6, 6)" in body["reading"]  # d_out 4, 2 heads: (b, num_heads, T, T)
        if step["page"] == "windows":
            assert "window of 3" in body["reading"]


def test_the_book_step_reads_the_books_weights():
    body = step_views.draw({"kind": "view", "page": "walkthrough", "params": {}})
    # the book's CausalAttention on its six tokens (seed 123): "step" attends most to "journey", 0.17 (§3.5.1); four
    # keys print 0.17 on the chart, which cannot show a winner: the reading names the tie
    assert body["reading"] == ("“step” attends about equally to “journey”, “starts”, “with”, “step” (0.17 each on the "
                               "chart; the largest, “journey”, is 0.1709).")
    rows = body["spec"]["datasets"][next(iter(body["spec"]["datasets"]))]
    assert {(r["q"], r["k"]): round(r["value"], 4) for r in rows}[(1, 0)] == 0.4833


def test_a_link_becomes_a_step_without_the_viewers_values():
    step = L.step_from_link("http://class:8501/masking-lab?lab_section=Methods&mask_method=renormalize&lang=zh"
                            "&present=true")
    assert step == {"kind": "view", "page": "masking-lab", "params": {"lab_section": "Methods",
                                                                      "mask_method": "renormalize"}}
    assert L.step_from_link("http://class:8501/?head=head+2")["page"] == "explore"  # the default page


@pytest.mark.parametrize("change, says", [
    (lambda d: d.update(extra=1), "unknown fields: extra"),
    (lambda d: d["steps"][0].update(colour="red"), "step 1 has unknown fields: colour"),
    (lambda d: d["steps"][2].update(page="settings"), "step 3: there is no page “settings”"),
    (lambda d: d["steps"][2]["params"].update(d_out="-4"), "step 3: the setting “d_out” = “-4” is not valid"),
    (lambda d: d["steps"][2]["params"].update(variant="Transformer"), "the setting “variant”"),
    (lambda d: d["steps"][2]["params"].update(colour="red"), "the page explore has no setting “colour”"),
    (lambda d: d["steps"][2]["params"].update(head="<script>"), "“head” = “<script>” is not a value"),
    (lambda d: d["steps"][1].update(question="favourite"), "step 2: there is no question “favourite”"),
    (lambda d: d["steps"][1].update(kind="video"), "“kind” must be “view” or “poll”"),
    (lambda d: d.update(steps=[]), "1 to 60 steps"),
    (lambda d: d.update(title=""), "needs a title"),
    (lambda d: d.update(version=7), "version 1"),
])
def test_a_bad_lesson_file_is_refused_whole_with_one_message(change, says):
    data = json.loads(L.export_json(L.ready()))
    change(data)
    with pytest.raises(L.BadLesson) as e:
        L.import_json(json.dumps(data))
    assert says in str(e.value)
    assert isinstance(e.value, ValueError)  # attn_core's Problem: shown translated by message()


def test_not_json_and_too_big_are_refused():
    with pytest.raises(L.BadLesson, match="not JSON"):
        L.import_json(b"\xff{")
    with pytest.raises(L.BadLesson, match="at most"):
        L.import_json(b" " * (L.MAX_FILE_BYTES + 1))


def test_reorder_and_remove():
    lesson = L.new_lesson("t", [{"kind": "view", "page": p, "params": {}} for p in ("explore", "tiled", "windows")])
    assert [s["page"] for s in L.move(lesson, 2, -1)["steps"]] == ["explore", "windows", "tiled"]
    assert [s["page"] for s in L.move(lesson, 0, -1)["steps"]] == ["explore", "tiled", "windows"]  # clamped
    assert [s["page"] for s in L.remove(lesson, 1)["steps"]] == ["explore", "windows"]
    assert [s["page"] for s in lesson["steps"]] == ["explore", "tiled", "windows"]  # the original is kept


TEACHER, STUDENT = "teachers-browser-0001", "students-phone-00002"  # device ids (cookies)


def test_save_reorder_export_import_round_trip(url):
    polls = ps.PollStore(url)
    store = L.LessonStore(polls)
    assert polls.schema_version() == len(ps.MIGRATIONS)
    lesson = L.ready()
    store.save(lesson, TEACHER)
    moved = L.move(lesson, 0, 2)
    moved["title"] = "Mine"
    store.save(moved, TEACHER)
    assert store.titles() == ["Chapter 3 in 40 minutes", "Mine"]
    other = L.LessonStore(ps.PollStore(url))  # another replica
    assert other.load("Mine")["steps"][2] == lesson["steps"][0]
    assert L.import_json(L.export_json(other.load("Mine"))) == moved
    moved["steps"] = moved["steps"][:3]
    other.save(moved, TEACHER)  # saved again under its title, from its browser (through any replica): replaced
    assert len(store.load("Mine")["steps"]) == 3
    store.delete("Mine", TEACHER)
    with pytest.raises(L.BadLesson, match="no saved lesson"):
        other.load("Mine")


def test_only_the_browser_that_saved_a_lesson_replaces_it(url):
    store = L.LessonStore(ps.PollStore(url))
    lesson = L.new_lesson("Chapter 3 in 40 minutes", L.ready()["steps"][:5])
    store.save(lesson, TEACHER)
    student = L.LessonStore(ps.PollStore(url))  # a phone in the room, through another replica
    opened = student.load("Chapter 3 in 40 minutes")  # opening is open to everyone
    assert opened == L.check_lesson(lesson) and TEACHER not in json.dumps(opened)  # the owner never leaves the store
    assert TEACHER not in L.export_json(opened)
    opened["steps"] = opened["steps"][:1]
    with pytest.raises(L.BadLesson) as e:
        student.save(opened, STUDENT)
    assert isinstance(e.value, ValueError)  # a Problem: the page shows it translated, no traceback
    assert str(e.value).startswith("“Chapter 3 in 40 minutes” was saved from another browser")
    assert "another title" in str(e.value)  # what to do
    with pytest.raises(L.BadLesson, match="another browser"):
        student.delete("Chapter 3 in 40 minutes", STUDENT)
    assert len(store.load("Chapter 3 in 40 minutes")["steps"]) == 5  # the teacher's lesson is untouched
    opened["title"] = "My chapter 3"
    assert student.save(opened, STUDENT) == "My chapter 3"  # changed and saved under a free title: fine
    opened["steps"] = opened["steps"] * 2
    student.save(opened, STUDENT)  # and it is the student's own now
    with pytest.raises(L.BadLesson, match="another browser"):
        store.save(opened, TEACHER)  # the rule is the same for the teacher
    lesson["steps"] = lesson["steps"][:2]
    store.save(lesson, TEACHER)  # the teacher replaces their own
    assert len(student.load("Chapter 3 in 40 minutes")["steps"]) == 2
    assert store.titles() == ["Chapter 3 in 40 minutes", "My chapter 3"]
    with pytest.raises(TypeError):
        store.save(lesson, "")  # no owner is a programming error, never "anyone's"


def test_an_imported_lesson_saves_under_a_free_or_own_title(url):
    store = L.LessonStore(ps.PollStore(url))
    store.save(L.new_lesson("Masks", L.ready()["steps"][:3]), TEACHER)
    file = L.export_json(store.load("Masks"))  # the teacher's file, shared with a colleague
    imported = L.import_json(file)
    with pytest.raises(L.BadLesson, match="another browser"):
        store.save(imported, STUDENT)
    imported["title"] = "Masks (copy)"
    assert store.save(imported, STUDENT) == "Masks (copy)"


def test_the_ready_lesson_is_not_in_the_store():
    """The shipped lesson is read from its file: nobody owns it, every browser opens it whatever the store holds."""
    assert L.READY["chapter3"].is_file() and "owner" not in L.READY["chapter3"].read_text()
    assert L.ready() == L.import_json(L.READY["chapter3"].read_bytes())


def test_a_lesson_saved_before_owners_goes_to_its_next_saver(url, monkeypatch):
    """A row from before the owner column has none: the first browser to save it again takes it (left open, it
    would stay replaceable by every phone for good; its teacher saving it once closes it)."""
    monkeypatch.setattr(ps, "MIGRATIONS", ps.MIGRATIONS[:2])  # the store as the previous release made it
    old = ps.PollStore(url)
    with old._tx() as run:
        run("INSERT INTO lessons (title, body, updated) VALUES (?, ?, ?)", "Old", L.export_json(L.ready()), 1.0)
    assert old.schema_version() == 2
    old.close()
    monkeypatch.undo()
    polls = ps.PollStore(url)
    store = L.LessonStore(polls)
    assert polls.schema_version() == len(ps.MIGRATIONS)  # migrated on first use
    with polls._tx() as run:
        assert run("SELECT owner FROM lessons WHERE title = ?", "Old") == [(None,)]
    assert store.load("Old")["steps"] == L.ready()["steps"]  # kept as it was
    lesson = L.new_lesson("Old", L.ready()["steps"][:2])
    store.save(lesson, TEACHER)  # the first saver takes it
    with pytest.raises(L.BadLesson, match="another browser"):
        store.save(lesson, STUDENT)
    store.save(lesson, TEACHER)


def test_the_rooms_step_is_in_the_store_for_late_joiners(url):
    polls = ps.PollStore(url)
    store = L.LessonStore(polls)
    code, secret = polls.create_room()
    assert store.position(code) is None
    with pytest.raises(L.BadLesson, match="no lesson running"):
        store.go(code, secret, 1)
    store.start(code, secret, L.ready())
    assert store.go(code, secret, 3) == 3
    late = L.LessonStore(ps.PollStore(url))  # a phone that joins now, through another replica
    lesson, step = late.running(code.lower())
    assert step == 3 and lesson == L.ready()
    assert late.position(code)[0] == 3
    assert store.go(code, secret, 99) == len(lesson["steps"]) - 1  # clamped
    with pytest.raises(ps.NotTeacher):
        late.go(code, "not-the-secret", 0)  # a student cannot move the class
    with pytest.raises(ps.NotTeacher):
        late.start(code, "not-the-secret", L.ready())
    polls.delete_room(code, secret)  # the room ends: its lesson with it
    with pytest.raises(ps.NoSuchPoll):
        late.position(code)


def test_the_rooms_lesson_expires_with_the_room(tmp_path):
    now = [1000.0]
    polls = ps.PollStore(str(tmp_path / "c.sqlite3"), clock=lambda: now[0])
    store = L.LessonStore(polls)
    code, secret = polls.create_room()
    store.start(code, secret, L.ready())
    now[0] += ps.EXPIRY_S + 1
    with pytest.raises(ps.NoSuchPoll):
        store.running(code)


def test_a_step_is_drawn_once_and_shared_by_every_replica(url):
    step_views.clear()
    one, two = L.LessonStore(ps.PollStore(url)), L.LessonStore(ps.PollStore(url))
    step = L.ready()["steps"][2]
    first = step_views.rendered(step, ENGLISH, one)
    for _unused in range(30):  # thirty phones on this replica
        assert step_views.rendered(step, ENGLISH, one) is first
    step_views._memory.clear()  # another replica: its memory is empty, the store has it
    assert step_views.rendered(step, ENGLISH, two) == first
    assert sum(step_views.DRAWN.values()) == 1
    zh = step_views.rendered(step, CHINESE, two)  # a phone switched to Chinese: its own drawing, once
    assert zh["spec"] != first["spec"] and sum(step_views.DRAWN.values()) == 2


def test_a_poll_step_keeps_its_poll_when_the_lesson_comes_back_to_it(url):
    """Back to a poll step shows the poll it asked, as it was left (the same question number, answers and state);
    the store shows it to phones, and takes answers for it again only while it is open."""
    polls = ps.PollStore(url)
    store = L.LessonStore(polls)
    code, secret = polls.create_room()
    store.start(code, secret, L.ready())
    assert store.step_poll(code, 1, secret) is None  # not asked yet
    first = store.ask_step(code, secret, 1, step_views.question(L.ready()["steps"][1]))
    for k, phone in enumerate(("phone-a-0000000001", "phone-b-0000000002", "phone-c-0000000003")):
        polls.answer(code, first, phone, k % 2)
    later = store.ask_step(code, secret, 4, step_views.question(L.ready()["steps"][4]))  # the next poll step
    assert later != first and polls.current(code).seq == later
    again = store.step_poll(code, 1, secret)  # Back to step 2
    assert again.seq == first and again.question == polls.poll(code, first).question
    assert polls.current(code).seq == first  # what the phones show
    assert polls.tally(code, first) == [2, 1, 0, 0]
    assert again.state == "closed"  # asking step 5's poll closed it: the teacher reopens it to take answers
    with pytest.raises(ps.PollClosed):
        polls.answer(code, first, "phone-d-0000000004", 0)
    polls.set_state(code, secret, "open")  # acts on the poll shown, not the latest
    polls.answer(code, first, "phone-d-0000000004", 0)
    assert polls.tally(code, first) == [3, 1, 0, 0] and polls.poll(code, later).state == "open"
    with pytest.raises(ps.PollClosed):  # a poll not shown takes no answer
        polls.answer(code, later, "phone-d-0000000004", 1)
    assert store.step_poll(code, 4).seq == later and polls.current(code).seq == first  # no secret: only a read
    store.start(code, secret, L.ready())  # the lesson started again asks its questions anew
    assert store.step_poll(code, 1, secret) is None


def test_the_split_into_heads_step_shows_view_and_transpose():
    """The step named for .view and .transpose shows them (the next poll asks about them): the shapes through both,
    and the queries' numbered columns before and after, each head's own; not one head's weights."""
    step = next(s for s in L.ready()["steps"] if s.get("page") == "shape-flow")
    body = step_views.draw(step)
    assert "queries (1, 6, 4) → .view (1, 6, 2, 2) → .transpose(1, 2) (1, 2, 6, 2)" in body["reading"]
    assert "spec" not in body and "png" not in body  # no heatmap of a head's weights
    before, after = ([row for rows in part["spec"]["datasets"].values() for row in rows] for part in body["specs"])
    assert sorted(r["number"] for r in before) == list(range(24))  # 6 tokens x d_out 4, in memory order
    for r in after:  # head h holds columns 2h, 2h+1 of d_out: number % 4 // 2 == h
        assert r["panel"] == f"head {int(r['number']) % 4 // 2 + 1}", r
    assert len(after) == 24


def test_a_reading_names_a_winner_only_where_the_chart_shows_one():
    """"'step' attends most to 'Your' (0.175)" beside a row whose four cells read 0.17. The chart
    prints 2 decimals: a key is named the largest only when it prints larger there; else every key that prints the
    same is named, as a tie."""
    import numpy as np

    labels = ["1: Your", "2: journey", "3: starts", "4: with", "5: one", "6: step"]
    row = [0.175, 0.171, 0.169, 0.166, 0.150, 0.169]
    query, key, weight, tied, shown = step_views._most(np.array([row] * 6), labels)
    assert (query, key, shown) == ("step", "Your", "0.17") and tied == ["Your", "journey", "starts", "with", "step"]
    query, key, weight, tied, shown = step_views._most(np.array([[0.30, 0.20, np.nan]] * 3), labels[:3])
    assert (key, weight, tied, shown) == ("Your", "0.30", ["Your"], "0.30")  # told apart on the chart: a winner
