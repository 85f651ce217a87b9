"""The suite's one way to wait for a condition: poll it, with a deadline, never sleep blindly.

`eventually(check)` calls `check()` (a function or a coroutine function) until its value is
accepted by `until` (truthiness by default) and returns that value; an exception listed in
`retry_on` counts as "not yet". After `timeout` seconds it fails with `what` and the last value
or error seen. The per-area helpers of the suite (harness `eventually`, `wait_for`, ...) are
call-shape adapters over this one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

DEFAULT_INTERVAL = 0.02


async def eventually(
    check: Callable[[], Any],
    *,
    until: Callable[[Any], bool] = bool,
    timeout: float = 10.0,
    interval: float = DEFAULT_INTERVAL,
    what: str = "condition",
    retry_on: tuple[type[BaseException], ...] = (),
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if until(value):
                return value
            last = value
        except retry_on as exc:
            last = exc
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)  # poll interval of the wait-for-condition loop
