"""A classroom server: hostile links and pastes, bounded input, damaged assets, foreign hosts."""

from __future__ import annotations

import re
import time
import tomllib

import pytest
from markdown_it import MarkdownIt
from test_poll_store import QUESTION

import attn_core.text.tokens as tokens_mod
from apptest_utils import ROOT, messages, new_app
from attn_core import MAX_TEXT_CHARS, tokenize
from dashboard.classroom import address
from dashboard.classroom import store as ps
from dashboard.guard import foreign_host, host_allowed
from dashboard.state.controls import DEFAULTS, URL_KEYS, URL_TEXT_LIMIT

PAGES = ("app_pages/explore.py", "app_pages/shape_flow.py", "app_pages/masking_lab.py", "app_pages/walkthrough.py")

# Payloads from the issue (Markdown image and link through ?device=), HTML, and formatting.
PAYLOADS = (
    "![x](http://attacker/p.png)",
    "[Click here to fix your GPU](https://evil.example/fix)",
    "<img src=x onerror=alert(1)>**bold** $x$ www.evil.example",
)


pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def rendered_texts(at) -> list[str]:
    """Every piece of text the app hands to Streamlit's Markdown renderer in this run."""
    out = []
    for kind in ("markdown", "caption", "warning", "error", "info", "success", "title", "header", "subheader"):
        out += [el.value for el in at.get(kind)]
    return out


def assert_inert(texts: list[str]) -> None:
    """Rendered as Markdown, no text makes a link, an image or an HTML tag, and no URL stays live: outside code
    spans no URL is left at all, escaped or not, since Streamlit's Markdown autolinks a bare URL even with its
    characters escaped (issue 20 item 12; tests/test_browser_truth.py checks Streamlit's own rendering)."""
    md = MarkdownIt("commonmark")
    for text in texts:
        html = md.render(text)
        assert "<a " not in html and "<img" not in html, (text, html)
        outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
        assert not re.search(r"(https?:|www\.)", outside_code) or (
            "evil" not in outside_code and "attacker" not in outside_code), text


# The pages' own link parameters, with the page that reads each (besides the sidebar's URL_KEYS).
PAGE_KEYS = {
    "app_pages/explore.py": ("head", "cell", "compare_methods", "row_scale", "weights_zoom_size",
                             "weights_zoom_start"),
    "app_pages/shape_flow.py": ("flow_step",),
    "app_pages/masking_lab.py": ("mistake", "lab_section"),
    "app_pages/walkthrough.py": ("walk_step",),
}


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("page", list(PAGE_KEYS))
def test_no_page_link_value_reaches_markdown_unescaped(page, payload):
    # MultiHeadAttention with 4 heads and a long text, so the head picker and the zoom window exist
    settings = dict(variant="MultiHeadAttention", num_heads="4", d_out="8", input_mode="learned", d_in="8",
                    sentence="word " * 300)
    for key in PAGE_KEYS[page]:
        at = new_app(**settings, **{key: payload})
        at.run()
        if page != "app_pages/explore.py":
            at.switch_page(page).run()
        msgs = messages(at)
        assert not msgs["exception"], (key, msgs)
        assert_inert(rendered_texts(at))


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_url_value_reaches_markdown_unescaped(payload):
    for key in URL_KEYS:
        at = new_app(**{key: payload})
        at.run()
        msgs = messages(at)
        assert not msgs["exception"], (key, msgs)
        assert_inert(rendered_texts(at))
        if key != "sentence":  # every other parameter rejects it, naming the parameter
            assert any(f"**{key}**" in w.replace("\\", "") for w in msgs["warning"]), (key, msgs)


def test_device_payload_from_the_issue_is_literal():
    at = new_app(device="[Click here to fix your GPU](https://evil.example/fix)")
    at.run()
    (warning,) = [w for w in messages(at)["warning"] if "device" in w]
    html = MarkdownIt("commonmark").render(warning)
    assert "<a " not in html and "[Click here to fix your GPU](https://evil.example/fix)" in html


@pytest.mark.parametrize("key, raw, used", [
    ("num_heads", "-3", "2"), ("d_out", "abc", "2"), ("variant", "foo", "CausalAttention (§3.5)"),
    ("dropout", "5", "0"), ("causal", "maybe", "true"), ("seed", "1.5", "123"), ("device", "tpu", "cpu"),
    ("context_length", "99999", "1024"), ("mask_method", "zero", "−∞ before softmax"),
])
def test_invalid_url_values_are_named_with_what_was_used(key, raw, used):
    at = new_app(**{key: raw})
    at.run()
    msgs = messages(at)
    assert not msgs["exception"]
    (warning,) = [w for w in msgs["warning"] if f"**{key}**" in w.replace("\\", "")]
    assert f"` {raw} `" in warning and f"using {used} instead" in warning.replace("\\", "")  # verbatim: a code span
    assert key not in at.query_params or at.query_params[key] != raw  # the link is corrected


def test_plain_identifiers_and_old_labels_both_work():
    at = new_app()
    at.query_params.update(variant="MultiHeadAttention", mask_method="renormalize", input_mode="learned",
                           num_heads="4", d_out="8", d_in="16", causal="false", dropout="0.1")
    at.run()
    assert not messages(at)["warning"] and not messages(at)["exception"], messages(at)
    assert at.selectbox(key="variant").value == "MultiHeadAttention"
    assert at.selectbox(key="mask_method").value == "renormalize"
    assert at.number_input(key="num_heads").value == 4 and at.toggle(key="causal").value is False
    assert at.slider(key="dropout").value == pytest.approx(0.1)
    old = new_app(variant="MultiHeadAttention", mask_method="renormalize")  # written as labels, as links were
    assert "§" in old.query_params["variant"]
    old.run()
    assert at.selectbox(key="variant").value == old.selectbox(key="variant").value == "MultiHeadAttention"


def test_the_link_carries_plain_identifiers_of_what_changed():
    at = new_app()
    at.run()
    assert not any(k in at.query_params for k in URL_KEYS)  # defaults stay out of the link
    at.selectbox(key="variant").set_value("MultiHeadAttention")
    at.selectbox(key="mask_method").set_value("renormalize")
    at.number_input(key="seed").set_value(7)
    at.run()
    assert at.query_params["variant"] == ["MultiHeadAttention"] or at.query_params["variant"] == "MultiHeadAttention"
    assert "renormalize" in str(at.query_params["mask_method"]) and "7" in str(at.query_params["seed"])


def test_text_too_long_for_a_link_stays_out_of_it():
    long_text = "猫が好きです。" * 300  # 2,100 characters, ~19,000 once URL-encoded
    at = new_app()
    at.run()
    at.text_area(key="sentence").set_value(long_text).run()
    assert "sentence" not in at.query_params
    assert any("too long to put in a link" in c.value for c in at.caption)
    at.text_area(key="sentence").set_value("the cat sat").run()
    assert "the cat sat" in str(at.query_params["sentence"])


def test_input_is_bounded_before_any_work(monkeypatch):
    # the box has no max_chars (the browser drops a longer paste silently): the code refuses, before any work
    assert not new_app().run().text_area(key="sentence").max_chars
    calls = []
    real = tokens_mod.bpe_encoding
    monkeypatch.setattr(tokens_mod, "bpe_encoding", lambda: calls.append(1) or real())
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="characters"):
        tokenize("x" * (MAX_TEXT_CHARS + 1))
    assert not calls and time.perf_counter() - t0 < 0.05  # refused before the tokenizer ran
    with pytest.raises(ValueError, match="Shorten the text by about 76 tokens"):
        tokenize(" word" * 1100, max_tokens=1024)
    assert len(" word" * 1100) < MAX_TEXT_CHARS


def test_a_paste_over_the_limit_is_cut_and_explained_not_a_traceback():
    at = new_app()
    at.run()
    at.session_state["sentence"] = "word " * 5000  # 25,000 characters: what a hostile client could send
    at.run()
    msgs = messages(at)
    assert not msgs["exception"] and any("25,000 characters long" in e and "Shorten it by 5,000 characters" in e
                                         for e in msgs["error"]), msgs


def test_refused_texts_are_not_cached():
    from dashboard.state.compute import cached_tokens

    at = new_app(sentence="word " * 1100)
    at.run()
    assert any("up to 1024 tokens" in e for e in messages(at)["error"])
    # a refused text raises inside the cached function (Streamlit caches no exception), so no
    # cache entry ever holds more than MAX_POSITIONS tokens
    with pytest.raises(ValueError, match="Shorten the text"):
        cached_tokens("word " * 1100)


@pytest.mark.parametrize("damage", ["missing", "directory", "empty", "garbled"])
@pytest.mark.parametrize("page", PAGES)
def test_damaged_asset_gives_a_plain_message_without_paths(tmp_path, monkeypatch, damage, page):
    path = tmp_path / "r50k_base.tiktoken"
    if damage == "directory":
        path.mkdir()
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbled":
        path.write_bytes(b"not a rank file\n")
    monkeypatch.setattr(tokens_mod, "RANKS_PATH", path)
    tokens_mod.bpe_encoding.cache_clear()
    try:
        at = new_app(input_mode="learned")
        at.run()
        if page != PAGES[0]:
            at.switch_page(page).run()
        msgs = messages(at)
        assert not msgs["exception"], msgs
        shown = " ".join(msgs["error"] + msgs["warning"])
        assert "vocabulary" in shown and "missing or damaged" in shown, msgs
        assert str(tmp_path) not in shown and "/work" not in shown and str(ROOT) not in shown
    finally:
        tokens_mod.bpe_encoding.cache_clear()


def test_host_check_rejects_foreign_names():
    assert host_allowed("localhost:8501") and host_allowed("127.0.0.1:8501") and host_allowed("[::1]:8501")
    assert host_allowed("192.168.1.20:8501") and host_allowed("http://localhost:8501")
    assert not host_allowed("attacker.example") and not host_allowed("attacker.example:8501")
    assert not host_allowed("http://attacker.example:8501")
    assert foreign_host({"Host": "attacker.example:8501", "Origin": "http://attacker.example:8501"}) == \
        "attacker.example"
    assert foreign_host({"Host": "127.0.0.1:8501", "Origin": "http://evil.example"}) == "evil.example"
    assert foreign_host({"Host": "localhost:8501", "Origin": "http://localhost:8501"}) is None
    assert foreign_host({}) is None


def test_host_allow_list_from_environment(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_HOSTS", "lab.school.example, other.example")
    assert host_allowed("lab.school.example:8501") and host_allowed("http://other.example")
    assert not host_allowed("attacker.example")
    monkeypatch.setenv("ATTENTION_LAB_PUBLIC_URL", "https://poll.school.example:8443/")  # the students' link's name
    assert host_allowed("poll.school.example") and not host_allowed("attacker.example")


def test_server_config_is_local_and_quiet():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["client"]["showErrorDetails"] == "none"
    assert cfg["client"]["toolbarMode"] == "viewer"
    assert cfg["server"]["disconnectedSessionTTL"] <= 60


def test_url_text_limit_keeps_links_loadable():
    from urllib.parse import quote_plus

    assert URL_TEXT_LIMIT <= 16_000  # far below the request line a server or browser refuses
    assert len(quote_plus(str(DEFAULTS["sentence"]))) < URL_TEXT_LIMIT


# -- Ask the class: the teacher's room comes back on any replica (the store part, on both backends) --------------


def test_the_teacher_reclaims_the_room_from_another_process(url):
    first, other = ps.PollStore(url), ps.PollStore(url)  # the teacher's replica, and the one after its SIGKILL
    code, secret = first.create_room()
    assert other.reclaim(code, secret) is None  # the room, before its first question
    seq = first.ask(code, secret, QUESTION)
    first.answer(code, seq, "phone1", 2)
    first.close()  # the replica is gone
    poll = other.reclaim(code.lower(), secret)
    assert (poll.code, poll.seq, poll.state, poll.question) == (code, seq, "open", QUESTION)
    assert other.tally(code, seq) == [0, 0, 1, 0]
    with pytest.raises(ps.NotTeacher):
        other.reclaim(code, "not-the-secret")
    with pytest.raises(ps.NotTeacher):
        other.reclaim(code, "")
    other.set_state(code, secret, "revealed")  # close / reveal / end still work with the secret alone
    assert other.ask(code, secret, QUESTION) == seq + 1  # the numbering goes on
    other.delete_room(code, secret)
    with pytest.raises(ps.NoSuchPoll):
        other.reclaim(code, secret)


# -- Ask the class: the address in the students' link and QR code --------------------------------------------------
def test_join_address_prefers_the_configured_public_url():
    base = address.choose("http://127.0.0.1:8501/explore", "https://lab.school.example/", "0.0.0.0", "192.168.1.20")
    assert base.url == "https://lab.school.example" and base.warning is None
    assert "ATTENTION_LAB_PUBLIC_URL" in str(base.why) and "https://lab.school.example" in str(base.why)
    assert address.choose("http://127.0.0.1:8501/", "10.0.0.5:8080").url == "http://10.0.0.5:8080"


def test_join_address_uses_the_address_the_class_was_started_on():
    base = address.choose("http://127.0.0.1:8501/", None, "192.168.1.30", "192.168.1.20")
    assert base.url == "http://192.168.1.30:8501" and base.warning is None  # the teacher's port, the bound host
    assert "started on" in str(base.why)
    assert address.choose("http://localhost:9000/", None, "fe80::1", None).url == "http://[fe80::1]:9000"


def test_join_address_keeps_a_real_address_the_browser_used():
    base = address.choose("https://lab.school.example:8443/explore", None, "127.0.0.1", "192.168.1.20")
    assert base.url == "https://lab.school.example:8443" and base.warning is None and "browser" in str(base.why)


def test_join_address_falls_back_to_the_lan_address_with_the_teachers_port():
    base = address.choose("http://127.0.0.1:8601/explore", None, "0.0.0.0", "192.168.1.20")
    assert base.url == "http://192.168.1.20:8601" and base.warning is None and "local network" in str(base.why)
    assert address.choose("http://localhost:8501/", None, "", "10.1.2.3").url == "http://10.1.2.3:8501"


def test_join_address_on_loopback_warns_and_says_what_to_change():
    for bound, lan in [("127.0.0.1", "192.168.1.20"), ("0.0.0.0", None), ("localhost", None)]:
        base = address.choose("http://127.0.0.1:8501/", None, bound, lan)
        assert base.url == "http://127.0.0.1:8501", bound  # a server on loopback only: the LAN cannot reach it
        warning = str(base.warning)
        assert "cannot reach `127.0.0.1`" in warning and "ATTENTION_LAB_PUBLIC_URL" in warning
        assert "--address 0.0.0.0" in warning


def test_join_address_from_the_environment(monkeypatch):
    monkeypatch.setattr(address, "lan_address", lambda: "192.168.1.20")
    monkeypatch.delenv(address.PUBLIC_URL_ENV, raising=False)
    monkeypatch.setenv(address.BIND_ADDRESS_ENV, "0.0.0.0")  # deploy.course --address 0.0.0.0, replicas on loopback
    assert address.from_environment("http://127.0.0.1:8501/", "127.0.0.1").url == "http://192.168.1.20:8501"
    monkeypatch.delenv(address.BIND_ADDRESS_ENV)
    assert address.from_environment("http://127.0.0.1:8501/", "127.0.0.1").warning is not None
    monkeypatch.setenv(address.PUBLIC_URL_ENV, "http://lab.example:80")
    assert address.from_environment("http://127.0.0.1:8501/", "127.0.0.1").url == "http://lab.example:80"


def test_lan_address_is_not_loopback():
    found = address.lan_address()
    assert found is None or not address.is_loopback(found)
    assert address.is_loopback("127.0.0.1") and address.is_loopback("[::1]") and address.is_loopback("localhost")
    assert not address.is_loopback("192.168.1.20") and not address.is_loopback("lab.example")
