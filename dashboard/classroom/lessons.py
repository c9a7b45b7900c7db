"""A lesson: an ordered list of steps the teacher shows the class, each a prepared view (a page and its link's
settings) or a poll. Validated as a whole (a file that is partly wrong is refused whole, with one message), kept in
the class store beside the polls (saved lessons, a room's running lesson and its current step), exported and
imported as a small JSON file. No Streamlit here.

A lesson's JSON::

    {"format": "attention-lab-lesson", "version": 1, "title": "...",
     "steps": [{"kind": "view", "page": "explore", "title": "...", "params": {"mask_method": "renormalize"}},
               {"kind": "poll", "question": "masking", "params": {...}}]}

``params`` are link values (strings, as a page's share link writes them): the sidebar's settings go through their
schema (``settings_schema.SCHEMA``), a page's own ones through :data:`PAGE_PARAMS`.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from attn_core.messages import N_, Problem
from dashboard.classroom.store import EXPIRY_S, Poll, PollStore, normalize_code

FORMAT, VERSION = "attention-lab-lesson", 1
READY_DIR = Path(__file__).resolve().parent / "ready"
READY = {"chapter3": READY_DIR / "chapter3.json"}  # id -> file of the lessons shipped with the app
MAX_STEPS = 60
MAX_TITLE = 120
MAX_FILE_BYTES = 256 * 1024  # a lesson is a few kB; anything bigger is not one

# The pages a step may show, by url path, with their titles (translated where shown).
PAGES = {
    "walkthrough": N_("Book walkthrough"),
    "text-to-vectors": N_("Text → vectors"),
    "explore": N_("Explore"),
    "shape-flow": N_("Shape flow"),
    "masking-lab": N_("Masking lab"),
    "windows": N_("Windows & sinks"),
    "tiled": N_("Tiled attention"),
}
QUESTIONS = {
    "attends_most": N_("Which token does this token attend to most?"),
    "masking": N_("Renormalize or −∞: which masking gives this row?"),
    "view_shape": N_("The shape of the keys after .view"),
}
# A page's own link values (besides the sidebar's settings): the pattern each must match.
PAGE_PARAMS: dict[str, dict[str, str]] = {
    "explore": {"head": r"head \d{1,2}", "section": r"[\w &()'’,.:/−-]{1,60}", "row_scale": r"true|false",
                "cell": r"\d{1,4},\d{1,4}"},
    "masking-lab": {"lab_section": r"[\w &()'’,.:/−-]{1,60}", "mistake": r"[\w &()'’,.:/−-]{1,60}"},
    "windows": {"win_section": r"[\w &()'’,.:/−-]{1,60}"},
    "text-to-vectors": {"t2v_section": r"[\w &()'’,.:/−-]{1,60}"},
}
DROPPED = ("lang", "present", "code", "me")  # the viewer's, not the view's: a link may carry them, a step keeps none
STEP_FIELDS = {"kind", "page", "question", "title", "params"}
LESSON_FIELDS = {"format", "version", "title", "steps"}


class BadLesson(Problem):
    """A lesson (a file, a link, a step) that cannot be used; the message says what to change."""


def _schema():
    from dashboard.state.settings_schema import SCHEMA

    return SCHEMA


def _check_params(params: object, page: str, n: int) -> dict[str, str]:
    """A step's link values, each validated as the page would validate its link; a normalized copy."""
    from dashboard.state.settings_schema import BadValue

    if not isinstance(params, dict):
        raise BadLesson(N_("step {n}: “params” must be an object of link values"), n=n)
    schema, own = _schema(), PAGE_PARAMS.get(page, {})
    out: dict[str, str] = {}
    for key, raw in params.items():
        if key in DROPPED:
            continue
        if not isinstance(raw, str | int | float | bool):
            raise BadLesson(N_("step {n}: the value of “{key}” must be text or a number"), n=n, key=key)
        raw = ("true" if raw else "false") if isinstance(raw, bool) else str(raw)
        if key in schema:
            try:
                schema[key].parse(raw)
            except BadValue as e:
                raise BadLesson(N_("step {n}: the setting “{key}” = “{value}” is not valid ({reason})"), n=n,
                                key=key, value=raw[:40], reason=str(e)) from None
        elif key in own:
            if not re.fullmatch(own[key], raw):
                raise BadLesson(N_("step {n}: “{key}” = “{value}” is not a value this page takes"), n=n,
                                key=key, value=raw[:40])
        else:
            raise BadLesson(N_("step {n}: the page {page} has no setting “{key}”"), n=n, page=page, key=key)
        out[str(key)] = raw
    return out


def check_step(step: object, n: int = 1) -> dict:
    """One step, validated (``n``: its number, for the message); a normalized copy."""
    if not isinstance(step, dict):
        raise BadLesson(N_("step {n} is not an object"), n=n)
    unknown = sorted(set(step) - STEP_FIELDS)
    if unknown:
        raise BadLesson(N_("step {n} has unknown fields: {fields}"), n=n, fields=", ".join(map(str, unknown)))
    title = step.get("title", "")
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise BadLesson(N_("step {n}: the title must be text of at most {limit} characters"), n=n,
                        limit=MAX_TITLE)
    kind = step.get("kind")
    out: dict = {"kind": kind}
    if kind == "view":
        page = step.get("page")
        if page not in PAGES:
            raise BadLesson(N_("step {n}: there is no page “{page}” (a step shows one of: {pages})"), n=n,
                            page=str(page)[:40], pages=", ".join(PAGES))
        if "question" in step:
            raise BadLesson(N_("step {n}: a view has no question"), n=n)
        out["page"] = page
    elif kind == "poll":
        question = step.get("question")
        if question not in QUESTIONS:
            raise BadLesson(N_("step {n}: there is no question “{question}” (one of: {questions})"), n=n,
                            question=str(question)[:40], questions=", ".join(QUESTIONS))
        if "page" in step:
            raise BadLesson(N_("step {n}: a poll has no page"), n=n)
        out["question"] = question
    else:
        raise BadLesson(N_("step {n}: “kind” must be “view” or “poll”"), n=n)
    if title:
        out["title"] = title
    out["params"] = _check_params(step.get("params", {}), out.get("page", "explore"), n)
    return out


def check_lesson(data: object) -> dict:
    """A whole lesson, validated (every step); a normalized copy. :class:`BadLesson` names the first problem."""
    if not isinstance(data, dict):
        raise BadLesson(N_("a lesson file is a JSON object with a title and steps"))
    unknown = sorted(set(data) - LESSON_FIELDS)
    if unknown:
        raise BadLesson(N_("the lesson has unknown fields: {fields}"), fields=", ".join(map(str, unknown)))
    if data.get("format", FORMAT) != FORMAT or data.get("version", VERSION) != VERSION:
        raise BadLesson(N_("this is not an Attention Lab lesson of version {version}"), version=VERSION)
    title = data.get("title")
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise BadLesson(N_("the lesson needs a title of 1 to {limit} characters"), limit=MAX_TITLE)
    steps = data.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise BadLesson(N_("the lesson needs 1 to {limit} steps"), limit=MAX_STEPS)
    return {"format": FORMAT, "version": VERSION, "title": title.strip(),
            "steps": [check_step(s, i + 1) for i, s in enumerate(steps)]}


def new_lesson(title: str, steps: list[dict] | None = None) -> dict:
    return {"format": FORMAT, "version": VERSION, "title": title, "steps": list(steps or [])}


def export_json(lesson: dict) -> str:
    """The lesson as the JSON file a teacher downloads (validated first: a file that imports again)."""
    return json.dumps(check_lesson(lesson), ensure_ascii=False, indent=1)


def import_json(raw: bytes | str) -> dict:
    """A lesson file read and validated whole; :class:`BadLesson` if any of it is wrong (nothing half-imported)."""
    if len(raw) > MAX_FILE_BYTES:
        raise BadLesson(N_("this file is {n:,} bytes: a lesson file is at most {limit:,}"), n=len(raw),
                        limit=MAX_FILE_BYTES)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadLesson(N_("this file is not JSON ({reason})"), reason=str(e)[:80]) from None
    return check_lesson(data)


def ready(name: str = "chapter3") -> dict:
    """A lesson shipped with the app."""
    return import_json(READY[name].read_bytes())


def step_from_link(link: str) -> dict:
    """A view step from a page's link (its address bar, or the share link), validated."""
    parts = urlsplit(link.strip())
    page = parts.path.strip("/").split("/")[-1] or "explore"
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    return check_step({"kind": "view", "page": page, "params": params})


def move(lesson: dict, i: int, delta: int) -> dict:
    """The lesson with step ``i`` moved ``delta`` places (clamped at the ends)."""
    steps = list(lesson["steps"])
    j = max(0, min(len(steps) - 1, i + delta))
    steps.insert(j, steps.pop(i))
    return {**lesson, "steps": steps}


def remove(lesson: dict, i: int) -> dict:
    return {**lesson, "steps": [s for k, s in enumerate(lesson["steps"]) if k != i]}


def step_key(step: dict, lang: str) -> str:
    """What a step's drawing is a function of: its content and the language (the shared render's key)."""
    text = json.dumps(step, sort_keys=True, ensure_ascii=False) + "|" + lang
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _check_owner(owner: object) -> None:
    if not isinstance(owner, str) or not owner:  # a programming error: no owner would make every title anyone's
        raise TypeError(f"a saved lesson's owner is a device id; got {owner!r}")


def _not_yours(title: str) -> BadLesson:
    return BadLesson(N_("“{title}” was saved from another browser, and only that browser can replace it. Give your "
                        "lesson another title and save it again (to build on that lesson: open it, change it and save "
                        "it under a new title)"), title=title[:MAX_TITLE])


class LessonStore:
    """Lessons in the class store (the poll store's database, SQLite or PostgreSQL): saved lessons by title (each
    replaced only from the browser that saved it: its device id, kept beside the lesson and never in it), each
    room's running lesson and the step it is at (so a late joiner or a reconnect lands on it), and shared renders."""

    def __init__(self, polls: PollStore):
        self.polls = polls

    # -- saved lessons -------------------------------------------------------------------------------------------
    def save(self, lesson: dict, owner: str) -> str:
        """Save the lesson under its title; the title. ``owner`` is the saving browser's device id: a title another
        browser saved is refused (:class:`BadLesson`), the owner's own is replaced. One statement, so two browsers
        saving one new title at once cannot both win."""
        lesson = check_lesson(lesson)
        _check_owner(owner)
        with self.polls._tx() as run:
            done = run("INSERT INTO lessons (title, body, updated, owner) VALUES (?, ?, ?, ?) ON CONFLICT (title) DO "
                       "UPDATE SET body = excluded.body, updated = excluded.updated, owner = excluded.owner "
                       "WHERE lessons.owner IS NULL OR lessons.owner = excluded.owner RETURNING title",
                       lesson["title"], json.dumps(lesson), self.polls.clock(), owner)
        if not done:  # (raised out here: an error inside the transaction would read as the store being down)
            raise _not_yours(lesson["title"])
        return lesson["title"]

    def titles(self) -> list[str]:
        with self.polls._tx() as run:
            return [r[0] for r in run("SELECT title FROM lessons ORDER BY title")]

    def load(self, title: str) -> dict:
        with self.polls._tx() as run:
            rows = run("SELECT body FROM lessons WHERE title = ?", title)
        if not rows:
            raise BadLesson(N_("there is no saved lesson called “{title}”"), title=title[:MAX_TITLE])
        return check_lesson(json.loads(rows[0][0]))

    def delete(self, title: str, owner: str) -> None:
        """Delete a saved lesson: only from the browser that saved it, as :meth:`save` (none there: nothing)."""
        _check_owner(owner)
        with self.polls._tx() as run:
            run("DELETE FROM lessons WHERE title = ? AND (owner IS NULL OR owner = ?)", title, owner)
            kept = run("SELECT 1 FROM lessons WHERE title = ?", title)
        if kept:
            raise _not_yours(title)

    # -- a room's running lesson ---------------------------------------------------------------------------------
    def start(self, code: str, secret: str, lesson: dict, step: int = 0) -> None:
        """Run ``lesson`` in the teacher's room, at ``step`` (the teacher's secret is needed)."""
        lesson = check_lesson(lesson)
        now = self.polls.clock()
        with self.polls._tx() as run:
            self.polls._room(run, code, secret)
            run("DELETE FROM step_renders WHERE created < ?", now - EXPIRY_S)
            run("DELETE FROM lesson_polls WHERE code = ?", code)  # a lesson started again asks its questions anew
            run("INSERT INTO room_lessons (code, body, step, moved) VALUES (?, ?, ?, ?) ON CONFLICT (code) DO UPDATE "
                "SET body = excluded.body, step = excluded.step, moved = excluded.moved", code, json.dumps(lesson),
                max(0, min(step, len(lesson["steps"]) - 1)), now)
            run("UPDATE rooms SET expires = ? WHERE code = ?", now + EXPIRY_S, code)

    def go(self, code: str, secret: str, step: int) -> int:
        """Move the room's lesson to ``step`` (clamped to the lesson); the step it is at now."""
        now = self.polls.clock()
        with self.polls._tx() as run:
            self.polls._room(run, code, secret)
            rows = run("SELECT body FROM room_lessons WHERE code = ?", code)
            if rows:  # (an error raised in here would read as the store being down)
                step = max(0, min(step, len(json.loads(rows[0][0])["steps"]) - 1))
                run("UPDATE room_lessons SET step = ?, moved = ? WHERE code = ?", step, now, code)
                run("UPDATE rooms SET expires = ? WHERE code = ?", now + EXPIRY_S, code)
        if not rows:
            raise BadLesson(N_("this class has no lesson running: start one first"))
        return step

    def stop(self, code: str, secret: str) -> None:
        with self.polls._tx() as run:
            self.polls._room(run, code, secret)
            run("DELETE FROM room_lessons WHERE code = ?", code)
            run("DELETE FROM lesson_polls WHERE code = ?", code)

    def position(self, code: str) -> tuple[int, float] | None:
        """The room's current step and when it moved (cheap: what a follower reads every second); None without a
        lesson; ``NoSuchPoll`` for a code that does not exist (or expired)."""
        code = normalize_code(code)
        with self.polls._tx() as run:
            self.polls._room(run, code)
            rows = run("SELECT step, moved FROM room_lessons WHERE code = ?", code)
        return (int(rows[0][0]), float(rows[0][1])) if rows else None

    def running(self, code: str) -> tuple[dict, int] | None:
        """The room's lesson and its current step; None without one."""
        code = normalize_code(code)
        with self.polls._tx() as run:
            self.polls._room(run, code)
            rows = run("SELECT body, step FROM room_lessons WHERE code = ?", code)
        return (json.loads(rows[0][0]), int(rows[0][1])) if rows else None

    # -- a poll step's own poll ------------------------------------------------------------------------------------
    def step_poll(self, code: str, step: int, secret: str | None = None) -> Poll | None:
        """The poll asked at step ``step`` of the room's lesson (None before it was asked). With the teacher's
        ``secret`` the room shows it again: Back to a poll step shows its question and tally as they were."""
        code = normalize_code(code)
        with self.polls._tx() as run:
            self.polls._room(run, code, secret)
            rows = run("SELECT seq FROM lesson_polls WHERE code = ? AND step = ?", code, step)
            if rows and secret is not None:
                run("UPDATE rooms SET shown = ? WHERE code = ?", rows[0][0], code)
        return self.polls.poll(code, int(rows[0][0])) if rows else None

    def ask_step(self, code: str, secret: str, step: int, question: dict) -> int:
        """Ask ``question`` as step ``step``'s poll (the room shows it); its number."""
        seq = self.polls.ask(code, secret, question)
        with self.polls._tx() as run:
            run("INSERT INTO lesson_polls (code, step, seq) VALUES (?, ?, ?) ON CONFLICT (code, step) DO UPDATE "
                "SET seq = excluded.seq", code, step, seq)
        return seq

    # -- shared renders ------------------------------------------------------------------------------------------
    def render(self, key: str) -> dict | None:
        with self.polls._tx() as run:
            rows = run("SELECT body FROM step_renders WHERE key = ?", key)
        return json.loads(rows[0][0]) if rows else None

    def put_render(self, key: str, body: dict) -> None:
        with self.polls._tx() as run:
            run("INSERT INTO step_renders (key, body, created) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING", key,
                json.dumps(body), self.polls.clock())
