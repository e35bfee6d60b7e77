"""The service runs cycles with the cyclic garbage collector paused, and always
switches it back on."""

from __future__ import annotations

import gc
import threading
from types import SimpleNamespace

import pytest

from apportion.engine import cycle as cycle_mod
from apportion.service import scheduler
from apportion.service.gcpause import paused_gc


def test_collector_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested (a dry run inside a cycle's caller)
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still runs
    assert gc.isenabled()


def test_collector_comes_back_after_an_error() -> None:
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled() -> None:
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_threads_resume_collection_when_the_last_one_ends() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with paused_gc():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(5)
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's cycle still runs
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_the_scheduler_runs_its_cycle_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []

    def spy(snapshot: object, config: object) -> str:
        seen.append(gc.isenabled())
        return "plan"

    monkeypatch.setattr(cycle_mod, "run_cycle", spy)
    loaded = SimpleNamespace(snapshot=None, cycle_id=3)
    assert scheduler._run(loaded) == "plan"  # type: ignore[arg-type]
    assert seen == [False]
    assert gc.isenabled()
