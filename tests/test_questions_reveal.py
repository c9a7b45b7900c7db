"""The proof at the reveal, on a phone: the proving row (its labels, values at the precision that proves the answer,
the right answer marked), never the whole heatmap; and the proof charts' pure builders."""

from __future__ import annotations

import json

import pytest
from langs import CHINESE, LANGS

from apptest_utils import _rows, messages, new_app, open_page, spec_nodes
from attn_core.labs import questions as qs
from attn_core.labs.questions import PROOF_VALUES, Question, printed
from dashboard.classroom import store as ps
from dashboard.classroom.charts import RIGHT, proof_bars, proof_chart
from dashboard.classroom.ui import _stores


@pytest.fixture
def class_db(tmp_path, monkeypatch, fresh_caches):
    monkeypatch.setenv(ps.DB_ENV, str(tmp_path / "class.sqlite3"))
    yield tmp_path / "class.sqlite3"
    _stores.clear()


def proving_charts(at) -> list[tuple[list[dict], dict]]:
    """(rows, spec) of each chart on the page that marks a label with ✓ (the tally marks its ``choice`` instead)."""
    charts = [(_rows(el), json.loads(el.proto.spec)) for el in at.get("vega_lite_chart")]
    return [(rows, spec) for rows, spec in charts if any(str(r.get("label", "")).startswith("✓ ") for r in rows)]


@pytest.mark.parametrize("lang", list(LANGS))
def test_a_phone_sees_the_proving_row_at_the_reveal(class_db, lang):
    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    assert not messages(teacher)["exception"], messages(teacher)
    code = teacher.session_state["poll_room"]["code"]
    q = Question.from_dict(teacher.session_state["poll_current"]["question"]).in_words(str)
    phone = new_app(code=code, lang=lang)
    phone.run()
    phone.switch_page("app_pages/answer.py").run()
    assert not proving_charts(phone)  # nothing proves anything before the reveal
    teacher.button(key="poll_reveal").click().run()
    phone.run()
    assert not messages(phone)["exception"], messages(phone)
    charts = proving_charts(phone)
    assert len(charts) == 1, charts
    rows, spec = charts[0]
    marked = [r for r in rows if r["label"].startswith("✓ ")]
    assert [r["label"] for r in marked] == ["✓ " + q.choices[q.answer]] and marked[0]["colour"] == RIGHT
    assert len(rows) <= PROOF_VALUES and {r["label"].removeprefix("✓ ") for r in rows} >= set(q.choices)
    assert any(n.get("format") == f".{q.proof['decimals']}f" for n in spec_nodes(spec))  # the proving precision
    assert not any(n.get("mark") in ("rect", {"type": "rect"}) for n in spec_nodes(spec))  # a row, not a heatmap
    title = str(spec.get("title", ""))
    assert ("注意力权重" in title) if lang == CHINESE else title.startswith("weights"), title  # the phone's language


def test_a_near_tie_is_printed_to_the_decimals_that_tell_it():
    proof = {"title": "weights, row '4: with'", "labels": ["1: Your", "2: journey", "3: starts", "4: with"],
             "values": [0.341, 0.340, 0.2, 0.119], "highlight": 0, "decimals": 3}
    for chart in (proof_bars(proof), proof_chart(proof)):
        formats = {n["format"] for n in spec_nodes(chart.to_dict()) if "format" in n and n.get("field") == "value"}
        assert ".3f" in formats and ".2f" not in formats, formats
    bars = proof_bars(proof).to_dict()
    data = next(iter(bars["datasets"].values()))
    assert [r["label"] for r in data if r["colour"] == RIGHT] == ["✓ 1: Your"]


def test_a_masking_proof_on_a_phone_is_one_block_per_method_the_answer_marked():
    labels = ["1: a", "2: b", "3: c"]
    proof = {"title": "row '2: b' by each method", "labels": labels, "values": [0.4, 0.6, 0.0], "highlight": -1,
             "answer_row": "−∞ or renormalize (the same row)", "decimals": 3,
             "rows": {"−∞ or renormalize (the same row)": [0.4, 0.6, 0.0],
                      "zeros in the scores (not −∞)": [0.3, 0.4, 0.3]}}
    spec = proof_bars(proof).to_dict()
    assert "facet" in spec and spec["spec"]["width"] <= 260  # fits a 360-px phone beside its labels
    data = next(iter(spec["datasets"].values()))
    assert {r["row"] for r in data if r["colour"] == RIGHT} == {"✓ −∞ or renormalize (the same row)"}
    assert len(data) == 6
    assert proof_bars({"labels": ["keys.view"], "values": ["(1, 6, 2, 1)"], "highlight": 0}) is None  # a table


def test_the_head_question_reads_in_chinese_and_proves_at_its_decimals(smollm2):
    """The knock-out question was plain English on a Chinese phone; its losses print to the decimals that tell
    the answer from the next."""
    from attn_core.labs.head_question import harmful_head
    from attn_core.labs.knockout import repeated_words
    from dashboard.i18n import language, message

    question = harmful_head(smollm2, repeated_words(smollm2.tokenizer, 20, seed=1))
    with language(CHINESE):
        zh = Question.from_dict(json.loads(json.dumps(question.to_dict()))).in_words(message)
    words = [zh.prompt, zh.explain, zh.proof["title"], *zh.choices]
    assert all("layer" not in w and "head" not in w and "loss" not in w for w in words), words
    assert zh.choices[zh.answer].startswith("第 ") and "nats" in zh.explain
    losses = sorted(question.proof["values"], reverse=True)
    decimals = question.proof["decimals"]
    assert printed(losses[0], decimals) != printed(losses[1], decimals)
    assert printed(losses[0], decimals) in zh.explain


@pytest.mark.parametrize("n", [4, 8])
def test_a_phones_proving_row_is_as_tall_as_its_rows(n):
    """Issue 52 item 5: "Which token does 'starts' attend to most?" drew its four bars in 104 px, title included:
    they overlapped, two labels and the values ran together. Drawn (vl-convert, as a phone's browser does), each
    row gets its bar's height and every label and value is there."""
    import re

    from dashboard.classroom.charts import BAR_PX
    from dashboard.export.formats import chart_svg

    labels = [f"{k + 1}: word{k}" for k in range(n)]
    values = [round(0.1 + 0.8 * k / n, 3) for k in range(n)]
    proof = {"title": "weights, row 'x'", "labels": labels, "values": values, "highlight": n - 1, "decimals": 2}
    spec = proof_bars(proof).to_dict()  # a width fitted to the screen made the given height the whole chart's
    assert spec["autosize"]["type"] == "pad" and spec["width"] != "container" and spec["height"] == n * BAR_PX
    svg = chart_svg(proof_bars(proof)).decode()
    bars = sorted(float(y) for y in re.findall(r'aria-roledescription="bar" d="M[\d.]+,([\d.]+)h', svg))
    assert len(bars) == n and min(b - a for a, b in zip(bars, bars[1:])) >= BAR_PX - 0.5, bars
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert all(any(label in t for t in texts) for label in labels), texts
    assert all(f"{v:.2f}" in texts for v in values), texts


def test_the_masking_polls_tally_shows_every_choice_whole():
    """Issue 52 item 6: the tally cut its labels at 180 px ("renormalize raw scores (no s…"), just where the masking
    poll's choices differ. Drawn, every word of every choice is there, in English and in Chinese (no spaces to wrap
    at), and no label is cut."""
    import re

    from dashboard.classroom.charts import tally_chart
    from dashboard.export.formats import chart_svg

    for choices in (["−∞ or renormalize (the same row)", "zeros in the scores (not −∞)",
                     "renormalize raw scores (no softmax)", "softmax, zero the future, no renormalizing"],
                    ["−∞ 或重新归一化（同一行）", "在分数里填 0（不是 −∞）", "对原始分数重新归一化（没有 softmax）",
                     "softmax、把未来置零、不重新归一化"]):
        svg = chart_svg(tally_chart(choices, [3, 1, 2, 0], 0, width=170)).decode()
        shown = "".join(re.findall(r"<tspan[^>]*>([^<]*)</tspan>|<text[^>]*>([^<]*)</text>", svg) and
                        [a or b for a, b in re.findall(r"<tspan[^>]*>([^<]*)</tspan>|<text[^>]*>([^<]*)</text>", svg)])
        assert "…" not in shown, shown
        for choice in choices:
            assert choice.replace(" ", "") in ("✓" + shown).replace(" ", "").replace("✓", ""), (choice, shown)


# Each chart's axis labels that Vega drew (a label it hid for touching another has opacity 0), its bars and its box.
DRAWN_JS = """(scope) => [...document.querySelectorAll(`${scope} [data-testid="stVegaLiteChart"]`)].map(c => {
    const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left}; };
    const seen = e => { for (let n = e; n && n !== c; n = n.parentElement)
        if (getComputedStyle(n).opacity === '0') return false; return true; };
    const labels = [...c.querySelectorAll('svg .role-axis-label text')].filter(seen).map(t => ({...box(t),
        text: [...t.querySelectorAll('tspan')].map(s => s.textContent).join('') || t.textContent}));
    const bars = [...c.querySelectorAll('svg path[aria-roledescription="bar"]')].map(box);
    return {box: box(c), labels, bars};
})"""


@pytest.fixture(scope="module")
def masking_room(tmp_path_factory):
    """The ready lesson running at its masking poll on the real app, answered and revealed, the answer the issue's
    ("renormalize raw scores (no softmax)", marked ✓): (url, code, secret, question)."""
    from browser import require_browser, streamlit_server
    from dashboard.classroom import lessons as L
    from dashboard.classroom import step_views

    require_browser()
    db = str(tmp_path_factory.mktemp("masking") / "class.sqlite3")
    polls = ps.PollStore(db)
    code, secret = polls.create_room()
    lesson = L.ready()
    k = next(i for i, s in enumerate(lesson["steps"]) if s.get("question") == "masking")
    L.LessonStore(polls).start(code, secret, lesson, step=k)
    run, head = step_views.step_run(lesson["steps"][k]["params"])
    question = next(q for q in (qs.masking(run.trace, run.labels, head, seed=s) for s in range(20))
                    if str(q.choices[q.answer]).startswith("renormalize raw"))
    seq = L.LessonStore(polls).ask_step(code, secret, k, question.to_dict())
    for n, choice in enumerate([0, 1, 1, 2, 3, 3]):
        polls.answer(code, seq, f"phone{n}", choice)
    polls.set_state(code, secret, "revealed")
    with streamlit_server(env={ps.DB_ENV: db}) as url:
        yield url, code, secret, question


def _names_every_bar(chart: dict, names: list[str], per_name: int = 1) -> None:
    """Each of ``names`` drawn whole (``per_name`` times: once per block of bars), inside the chart, beside its
    bar; no two of those labels on each other; no two bars on each other."""
    def plain(text: str) -> str:
        return "".join(text.removeprefix("✓ ").split())

    shown = [lab for lab in chart["labels"] if plain(lab["text"]) in {plain(n) for n in names}]
    assert sorted(plain(lab["text"]) for lab in shown) == sorted(plain(n) for n in names * per_name), \
        ([lab["text"] for lab in chart["labels"]], names)
    assert all(lab["left"] >= chart["box"]["left"] - 0.5 for lab in shown), (chart["box"], shown)  # not cut
    shown.sort(key=lambda lab: lab["top"])
    assert all(b["top"] >= a["bottom"] - 1 for a, b in zip(shown, shown[1:])), shown
    bars = sorted(chart["bars"], key=lambda b: b["top"])
    assert len(bars) == len(shown) and all(b["top"] >= a["bottom"] - 0.5 for a, b in zip(bars, bars[1:])), bars
    for lab, bar in zip(shown, bars):
        assert lab["top"] - 1 <= (bar["top"] + bar["bottom"]) / 2 <= lab["bottom"] + 1, (lab, bar)


@pytest.mark.browser
@pytest.mark.parametrize("lang", list(LANGS))
def test_the_masking_polls_tally_and_proof_name_every_bar_on_the_page(masking_room, lang):
    """Issue 52 items 5 and 6, in Streamlit's page (its theme hides an axis label that touches the next; the
    exports' renderer has no such theme): the teacher's tally at 1280x720 and the phone's proof and tally at
    390x844 after Reveal name every bar, whole, none on another."""
    from browser import chromium_page, wait_drawn
    from dashboard.i18n import language, message

    url, code, secret, question = masking_room
    with language(lang):
        q = Question.from_dict(question.to_dict()).in_words(message)
    choices, tokens = list(q.choices), [str(t) for t in q.proof["labels"]]
    with chromium_page(1280, 720) as teacher:
        teacher.goto(f"{url}/lesson?room={code}&key={secret}&lang={lang}")
        panel = ".st-key-poll_panel_lesson"
        teacher.wait_for_function(f"() => document.querySelectorAll('{panel} [data-testid=\"stVegaLiteChart\"] svg')"
                                  ".length === 2", timeout=120_000)  # the tally and the proof
        wait_drawn(teacher)
        _names_every_bar(teacher.evaluate(DRAWN_JS, panel)[0], choices)

        phone = teacher.context.browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True,
                                                 has_touch=True)
        phone.goto(f"{url}/answer?code={code}&lang={lang}")
        phone.wait_for_function("() => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] svg')"
                                ".length === 2", timeout=120_000)  # the proof, then the tally
        wait_drawn(phone)
        proof, tally = phone.evaluate(DRAWN_JS, "")
        _names_every_bar(proof, tokens, per_name=len(choices))
        _names_every_bar(tally, choices)
