"""The poll store on both backends: SQLite (a file) and PostgreSQL (a throwaway cluster on loopback)."""

from __future__ import annotations

import threading

import pytest

from dashboard.classroom import store as ps

QUESTION = {"kind": "attends_most", "prompt": "Which?", "choices": ["a", "b", "c", "d"], "answer": 2,
            "explain": "", "proof": {}}


def test_schema_is_created_once_and_versioned(url):
    one, two = ps.PollStore(url), ps.PollStore(url)
    assert one.schema_version() == len(ps.MIGRATIONS)
    code, secret = one.create_room()
    assert two.schema_version() == len(ps.MIGRATIONS)  # a second process finds the schema, keeps the data
    assert two.current(code) is None
    if not ps.is_postgres(url):
        import sqlite3

        assert sqlite3.connect(url).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_class_answers_and_the_teacher_reveals(url):
    teacher, replica = ps.PollStore(url), ps.PollStore(url)  # two processes behind the balancer
    code, secret = teacher.create_room()
    assert len(code) == ps.CODE_LENGTH and set(code) <= set(ps.CODE_ALPHABET)
    seq = teacher.ask(code, secret, QUESTION)
    poll = replica.current(code.lower())  # a student types it in lower case
    assert (poll.seq, poll.state, poll.question["choices"]) == (seq, "open", QUESTION["choices"])
    for session, choice in [("s1", 0), ("s2", 2), ("s3", 2), ("s1", 2), ("s2", 2)]:  # s1 changes its mind
        replica.answer(code, seq, session, choice)
    assert teacher.tally(code, seq) == [0, 0, 3, 0]
    assert replica.my_answer(code, seq, "s1") == 2
    with pytest.raises(ps.NotTeacher):
        replica.set_state(code, "not-the-secret", "closed")
    teacher.set_state(code, secret, "revealed")
    assert replica.current(code).state == "revealed"
    with pytest.raises(ps.PollClosed):
        replica.answer(code, seq, "s4", 1)
    assert teacher.tally(code, seq) == [0, 0, 3, 0]  # kept after the reveal
    seq2 = teacher.ask(code, secret, {**QUESTION, "choices": ["x", "y", "z"]})  # the next question, same code
    assert seq2 == seq + 1 and replica.current(code).seq == seq2
    with pytest.raises(ps.PollClosed):
        replica.answer(code, seq, "s5", 1)  # a stale page answering the old question
    replica.answer(code, seq2, "s1", 1)
    assert teacher.tally(code, seq2) == [0, 1, 0] and teacher.tally(code, seq) == [0, 0, 3, 0]
    teacher.delete_room(code, secret)
    with pytest.raises(ps.NoSuchPoll):
        replica.current(code)


def test_bad_input_is_refused_with_a_message(url):
    s = ps.PollStore(url)
    code, secret = s.create_room()
    seq = s.ask(code, secret, QUESTION)
    with pytest.raises(ps.NoSuchPoll, match="no open poll with the code ZZZ"):
        s.current("zzz")
    for choice in (-1, 4, "1", None):
        with pytest.raises(ps.BadChoice, match="not one of"):
            s.answer(code, seq, "s1", choice)
    with pytest.raises(ps.BadChoice, match="session"):
        s.answer(code, seq, "", 1)
    with pytest.raises(ps.NoSuchPoll):
        s.answer(code, seq + 5, "s1", 1)
    assert s.tally(code, seq) == [0, 0, 0, 0]


def test_rooms_expire(url):
    now = [1_000_000.0]
    s = ps.PollStore(url, clock=lambda: now[0])
    code, secret = s.create_room()
    s.ask(code, secret, QUESTION)
    now[0] += ps.EXPIRY_S - 1
    assert s.current(code).seq == 1
    now[0] += 2
    with pytest.raises(ps.NoSuchPoll):
        s.current(code)
    s.create_room()  # sweeps expired rooms
    with pytest.raises(ps.NoSuchPoll):
        s.current(code)


def test_a_flood_from_one_session_is_cut_off(url, monkeypatch):
    monkeypatch.setattr(ps, "RATE_PER_MINUTE", 20)
    now = [2_000_000.0]
    s = ps.PollStore(url, clock=lambda: now[0])
    code, secret = s.create_room()
    seq = s.ask(code, secret, QUESTION)
    for i in range(20):
        s.answer(code, seq, "flood", i % 4)
    with pytest.raises(ps.TooManyAnswers):
        s.answer(code, seq, "flood", 0)
    s.answer(code, seq, "calm", 1)  # others are not affected
    assert s.tally(code, seq) == [0, 1, 0, 1]  # the flood counts once: its last accepted answer (19 % 4)
    now[0] += 61
    s.answer(code, seq, "flood", 0)
    assert s.tally(code, seq) == [1, 1, 0, 0]


def test_concurrent_answers_through_several_processes_count_exactly_once(url):
    stores = [ps.PollStore(url) for _ in range(3)]
    code, secret = stores[0].create_room()
    seq = stores[0].ask(code, secret, QUESTION)
    sessions = [f"student{i}" for i in range(60)]
    errors = []

    def student(k: int) -> None:
        try:
            for rep in range(3):  # each sends its answer three times, through different replicas
                for i in range(k, len(sessions), 6):
                    stores[(i + rep) % 3].answer(code, seq, sessions[i], i % 4)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=student, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert stores[1].tally(code, seq) == [sum(1 for i in range(60) if i % 4 == c) for c in range(4)]


def test_a_store_that_is_down_says_so(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(ps.StoreDown, match="not reachable"):
        ps.PollStore(str(blocked / "class.sqlite3")).create_room()  # a file where the folder should be
    with pytest.raises(ps.StoreDown, match="nothing was saved"):
        ps.PollStore("postgresql://nobody@127.0.0.1:1/none", connect_timeout=1).current("ABC")


def test_the_url_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(ps.DB_ENV, raising=False)
    assert ps.default_url() == str(ps.DEFAULT_PATH)
    monkeypatch.setenv(ps.DB_ENV, "postgresql://u@h/db")
    assert ps.PollStore().postgres


def test_the_course_gives_every_replica_one_store(monkeypatch, tmp_path):
    """deploy.course starts each replica with the same ATTENTION_LAB_CLASS_DB (HAProxy and waits stubbed out)."""
    from deploy import course, processes

    envs = {}

    class Proc:
        pid = 1

    def start(cmd, log, cwd=None, env=None):
        envs[cmd[0]] = envs.get(cmd[0], []) + [env]
        return Proc()

    monkeypatch.setattr(processes, "start", start)
    monkeypatch.setattr(processes, "wait_healthy", lambda *a, **k: None)
    monkeypatch.setattr(processes, "port_in_use", lambda *a, **k: False)
    monkeypatch.setattr(processes, "stop", lambda *a, **k: None)
    monkeypatch.setattr(course, "haproxy_path", lambda: "haproxy")
    monkeypatch.setattr(course.Course, "wait_states", lambda *a, **k: 0.0)
    db = str(tmp_path / "class.sqlite3")
    with course.Course(3, class_db=db, run_dir=tmp_path):
        pass
    replicas = [e for cmd, es in envs.items() if cmd != "haproxy" for e in es]
    assert replicas == [{ps.DB_ENV: db, "ATTENTION_LAB_BIND_ADDRESS": "127.0.0.1"}] * 3  # and HAProxy's address
    monkeypatch.delenv(ps.DB_ENV, raising=False)
    assert course.Course(2, run_dir=tmp_path).class_db == str(ps.DEFAULT_PATH)
