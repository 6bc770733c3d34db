"""A real ``ki serve`` app on a real loopback port: uvicorn in a thread of the test process.

The app is :func:`ki.api.app.create_app` on the test's context, served by uvicorn exactly as ``ki serve``
serves it (its lifespan entered, so the MCP session manager runs); clients talk HTTP to the port.
Handlers replaced by a test (``STAGE_HANDLERS``) apply to the runs the app launches (same process).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from tests.helpers.process import free_ports


@contextmanager
def serve_app(app, *, timeout: float = 60.0) -> Iterator[str]:
    """Serve ``app`` on a free loopback port; yields its base URL (``http://127.0.0.1:<port>``)."""
    (port,) = free_ports(1)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, name="ki-serve-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
