"""Blocking Go calls awaited from asyncio: each runs on a daemon thread of its own."""

import asyncio
import threading


def in_thread(fn, *args, name="ucxx_go-wait", unclaimed=None):
    """An asyncio future of fn(*args) run on a daemon thread of its own (fn blocks in
    Go, without the GIL), which no cancellation stops: args stay referenced until fn
    has returned, and a result nobody takes (the future was cancelled, or its loop
    closed) goes to unclaimed(result)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(ok, value):
        if not fut.done():
            (fut.set_result if ok else fut.set_exception)(value)
        elif ok and unclaimed is not None:
            unclaimed(value)

    def run():
        try:
            res, ok = fn(*args), True
        except BaseException as e:  # noqa: BLE001 (handed to the awaiting task)
            res, ok = e, False
        try:
            loop.call_soon_threadsafe(settle, ok, res)
        except RuntimeError:  # the loop is closed: nobody awaits any more
            if ok and unclaimed is not None:
                unclaimed(res)

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut
