"""emulator.upstream.free_port: the ports handed to upstream binaries that bind them later."""

from __future__ import annotations

import random

import pytest

from emulator import upstream


def test_free_port_never_hands_out_the_same_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every pick from the same few ports: each may be handed out once only, though nobody
    # binds them in between (a fleet's upstream processes start after all their ports are
    # picked).
    monkeypatch.setattr(upstream, "_handed_out", set(), raising=False)
    picks = iter([20001, 20002, 20001, 20002, 20003] * 10)
    monkeypatch.setattr(random, "randint", lambda low, high: next(picks))
    assert [upstream.free_port() for _ in range(3)] == [20001, 20002, 20003]
