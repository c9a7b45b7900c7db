"""The byte-bounded cache shared by sessions: bounded by bytes, least recently used first, idle entries dropped."""

from dashboard.state.cache import ByteLRU


def test_bounded_by_bytes_least_recently_used_first():
    c = ByteLRU(100, sizeof=len)
    for key in "abc":
        c.get(key, lambda key=key: key * 40)  # 40 bytes each: the third pushes out the first
    assert len(c) == 2 and c.nbytes == 80
    built = []
    assert c.get("b", lambda: built.append(1) or "x") == "b" * 40 and not built  # a hit
    c.get("d", lambda: "d" * 40)  # evicts c, the least recently used (b was just used)
    assert c.get("b", lambda: "rebuilt") == "b" * 40
    assert c.get("c", lambda: "rebuilt") == "rebuilt"


def test_one_oversized_entry_is_kept_alone():
    c = ByteLRU(10, sizeof=len)
    c.get("a", lambda: "a")
    assert c.get("big", lambda: "x" * 50) == "x" * 50 and len(c) == 1


def test_idle_entries_are_dropped():
    now = [0.0]
    c = ByteLRU(1000, sizeof=len, idle_s=60, clock=lambda: now[0])
    c.get("old", lambda: "o")
    c.get("new", lambda: "n")
    now[0] = 30
    assert c.sweep() == 0 and len(c) == 2
    c.get("new", lambda: "rebuilt")  # used again at t=30: its clock restarts
    now[0] = 61
    assert c.sweep() == 1 and c.get("new", lambda: "rebuilt") == "n"
    assert c.get("old", lambda: "rebuilt") == "rebuilt"


def test_holds_tells_a_cached_object_by_identity():
    import numpy as np

    cache = ByteLRU(1 << 20, lambda v: sum(x.nbytes for x in v) if isinstance(v, list) else v.nbytes)
    a = cache.get("a", lambda: np.zeros(4))
    assert cache.holds(a) and not cache.holds(np.zeros(4))  # equal is not the same object
    rows = cache.get("rows", lambda: list(np.ones((3, 4))))  # a list of views, as a page memoizes heads
    assert cache.holds(rows[1])


def test_with_no_tab_connected_the_caches_let_go_sooner(monkeypatch):
    """Issue 33: a class's memory comes back soon after it closes its tabs, not after the caches' idle time."""
    import dashboard.state.cache as cache

    now = [0.0]
    c = ByteLRU(1000, sizeof=len, idle_s=120, clock=lambda: now[0])
    kept = ByteLRU(1000, sizeof=len)  # no idle time: never swept
    monkeypatch.setattr(cache, "_SWEPT", [c, kept])
    c.get("a", lambda: "a")
    kept.get("k", lambda: "k")
    now[0] = cache.QUIET_IDLE_S + 1
    monkeypatch.setattr(cache, "connected_sessions", lambda: 2)  # tabs open: the idle time holds
    cache.sweep_all()
    assert len(c) == 1
    monkeypatch.setattr(cache, "connected_sessions", lambda: None)  # no server (a script): the same
    cache.sweep_all()
    assert len(c) == 1
    monkeypatch.setattr(cache, "connected_sessions", lambda: 0)  # every tab closed
    cache.sweep_all()
    assert len(c) == 0 and len(kept) == 1


def test_connected_sessions_is_none_outside_a_server():
    from dashboard.state.cache import connected_sessions

    assert connected_sessions() is None
