"""The cookies of the class: a phone's answer id (one random id for every tab of its browser: no Streamlit session
survives a new tab) and the secret of the room a teacher's browser teaches.

Nothing personal: 16 random bytes, in a cookie the page itself writes (Streamlit sets no cookie from the server)
and in the page's link (``?me=``), so a page that reconnects to another app process answers as before.
"""

from __future__ import annotations

import secrets

import streamlit as st

DEVICE_COOKIE = "attention_lab_me"
DEVICE_COOKIE_DAYS = 7  # a week of lessons on one phone, then a new id
TEACHER_COOKIE = "attention_lab_teacher"  # CODE.SECRET of the room this browser teaches (codes have no dot)


def _is_id(me: str | None) -> bool:
    return bool(me) and 16 <= len(me) <= 32 and all(c.isalnum() or c in "-_" for c in me)


def student_id() -> str:
    """This browser's random answer id. Kept in a cookie, so every tab of the phone answers as one (a second tab
    of the QR link replaces the answer instead of adding one), and in its link (``?me=``): when its app process
    dies and the page reconnects to another one, the same id comes back. The cookie wins over the link. Nothing
    personal: 16 random bytes."""
    kept = cookie(DEVICE_COOKIE)
    me = kept if _is_id(kept) else st.query_params.get("me", "")
    if not _is_id(me):
        me = st.session_state.setdefault("poll_session", secrets.token_urlsafe(16))
    if st.query_params.get("me") != me:
        st.query_params["me"] = me
    if kept != me:  # the page writes it; the next tab's connection brings it
        write_cookie(DEVICE_COOKIE, me, DEVICE_COOKIE_DAYS * 86400)
    return me


def owner_id() -> str:
    """This browser's random id as :func:`student_id` keeps it, but never written into the link: the teacher's pages
    are on the projector, and an id read off the screen would let a fresh phone take it. Each session that asks for
    it writes the cookie again, so a teacher's browser keeps its id while it comes back within the week."""
    kept = cookie(DEVICE_COOKIE)
    me = kept if _is_id(kept) else st.session_state.setdefault("poll_session", secrets.token_urlsafe(16))
    write_cookie(DEVICE_COOKIE, me, DEVICE_COOKIE_DAYS * 86400)
    return me


def cookie(name: str) -> str | None:
    """The cookie ``name`` as this session's connection brought it (read once, when the page connected)."""
    return (getattr(st.context, "cookies", None) or {}).get(name)


def write_cookie(name: str, value: str, max_age_s: int) -> None:
    """Write a cookie from the page (Streamlit sets none from the server), once per session and value: the
    connection's own cookies never change while it lasts. ``value`` is ours (ids and codes: no quoting needed);
    a ``max_age_s`` of 0 deletes it."""
    done = st.session_state.setdefault("_cookies_written", {})
    if done.get(name) == value:
        return
    done[name] = value
    st.html('<style>[class*="st-key-cookie_writer_"] {display: none;}</style>')
    with st.container(key=f"cookie_writer_{name}_{secrets.token_hex(4)}"):  # written once: no key to keep
        st.html(f'<script>document.cookie = "{name}={value}; path=/; max-age={max_age_s}; SameSite=Lax";</script>',
                unsafe_allow_javascript=True)
