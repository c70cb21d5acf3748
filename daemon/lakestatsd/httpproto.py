"""uvicorn's h11 protocol with a deadline for receiving each request.

uvicorn times out a keep-alive connection only while it is idle *after* a response. A
client that opens a connection and then sends nothing, half a request line, the headers
byte by byte, or a declared body it never finishes holds a connection (and, inside the
app, a task waiting for the body) for as long as it likes: a slowloris needs no
bandwidth. ``h11_max_incomplete_event_size`` caps only how *big* an incomplete request
may grow, never how long it may take.

``timed_h11_protocol(seconds)`` returns the protocol class given to ``uvicorn.Config(http=
...)``: from the moment a connection opens, or the first byte of a request after a
response, the whole request (line, headers, body) must arrive within ``seconds``. If it
does not, a request whose headers never completed gets ``408`` and the connection is
closed; a request whose body stalls is closed (the app sees a disconnect).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_TIMEOUT_BODY = b'{"error": "request_timeout", "message": "the request was not received in time"}'
_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY)
)


class _TimedH11Protocol(H11Protocol):
    request_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._receiving():
            self._arm()
        else:
            self._disarm()

    def _receiving(self) -> bool:
        """A request has started arriving and is not complete yet."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        return state is h11.IDLE and bool(self.conn.trailing_data[0])

    def _arm(self) -> None:
        if self._request_deadline is None:
            self._request_deadline = self.loop.call_later(self.request_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._request_deadline is not None:
            self._request_deadline.cancel()
            self._request_deadline = None

    def _expired(self) -> None:
        self._request_deadline = None
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE and self.conn.our_state is h11.IDLE:
            self.transport.write(_REQUEST_TIMEOUT)  # headers never completed: say why
        elif state is not h11.SEND_BODY:
            return  # the request is complete: the app is answering it
        self.logger.info("request not received in %.1fs: connection closed", self.request_timeout_s)
        self.transport.close()


def timed_h11_protocol(request_timeout_s: float) -> type[H11Protocol]:
    """The h11 protocol class whose requests must arrive within ``request_timeout_s``."""
    return type("TimedH11Protocol", (_TimedH11Protocol,), {"request_timeout_s": request_timeout_s})
