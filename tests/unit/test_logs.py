"""The processes' loop handler for connections the API client gave up on: a late failure of
one (uvloop leaves it on a future no one awaits, MagicStack/uvloop#437) is one warning line
without a traceback — seen as an ERROR and a traceback in the soak, while the apiserver was
paused — and anything else still reaches asyncio's default handler."""

from __future__ import annotations

import asyncio
import gc
import logging

from podgang.logs import quiet_abandoned_connections


async def test_a_late_failure_of_an_abandoned_connection_is_one_warning_line(caplog):
    loop = asyncio.get_running_loop()
    quiet_abandoned_connections(loop)
    try:
        with caplog.at_level(logging.INFO):
            future = loop.create_future()
            future.set_exception(ConnectionResetError())
            del future  # never retrieved: the loop's handler hears of it when it is collected
            gc.collect()
        [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert record.fields == {"error": "ConnectionResetError"}
    finally:
        loop.set_exception_handler(None)


async def test_anything_else_still_reaches_the_default_handler(caplog):
    loop = asyncio.get_running_loop()
    quiet_abandoned_connections(loop)
    try:
        with caplog.at_level(logging.INFO):
            loop.call_exception_handler({"message": "Future exception was never retrieved",
                                         "exception": ValueError("a bug")})
            loop.call_exception_handler({"message": "Task was destroyed but it is pending!"})
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert [r.getMessage() for r in errors] == ["Future exception was never retrieved",
                                                    "Task was destroyed but it is pending!"]
        assert errors[0].exc_info is not None  # the traceback of a real bug is kept
    finally:
        loop.set_exception_handler(None)
