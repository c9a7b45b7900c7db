"""A phone's answer id: one random id for every tab of its browser (no Streamlit session survives a new tab).

Nothing personal: 16 random bytes, in a cookie the page itself writes (Streamlit sets no cookie from the server)
and in the page's link (``?me=``), so a page that reconnects to another app process answers as before.
"""

from __future__ import annotations

import secrets

import streamlit as st

DEVICE_COOKIE = "attention_lab_me"
DEVICE_COOKIE_DAYS = 7  # a week of lessons on one phone, then a new id


def _is_id(me: str | None) -> bool:
    return bool(me) and 16 <= len(me) <= 32 and all(c.isalnum() or c in "-_" for c in me)


def student_id() -> str:
    """This browser's random answer id. Kept in a cookie, so every tab of the phone answers as one (a second tab
    of the QR link replaces the answer instead of adding one), and in its link (``?me=``): when its app process
    dies and the page reconnects to another one, the same id comes back. The cookie wins over the link. Nothing
    personal: 16 random bytes."""
    cookie = (getattr(st.context, "cookies", None) or {}).get(DEVICE_COOKIE)
    me = cookie if _is_id(cookie) else st.query_params.get("me", "")
    if not _is_id(me):
        me = st.session_state.setdefault("poll_session", secrets.token_urlsafe(16))
    if st.query_params.get("me") != me:
        st.query_params["me"] = me
    if cookie != me:  # the page writes it; the next tab's connection brings it
        st.html("<style>.st-key-poll_device {display: none;}</style>")
        with st.container(key="poll_device"):
            st.html(f'<script>document.cookie = "{DEVICE_COOKIE}={me}; path=/; max-age='
                    f'{DEVICE_COOKIE_DAYS * 86400}; SameSite=Lax";</script>', unsafe_allow_javascript=True)
    return me
