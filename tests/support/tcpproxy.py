"""A TCP proxy a test puts between a process and a server, to cut the link and restore it (a server restart
as the process sees it: every open connection drops, new ones are refused, then accepted again) without
touching the server, which other tests share.

`partition()` cuts it the other way, as a network partition does: nothing passes either way and nothing is
closed, so a client sees silence, not an error; bytes sent meanwhile wait, a new connection is accepted but
reaches nothing. `heal()` lets everything held through in order."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target`; `cut()` drops every connection and stops listening, `restore()`
    listens again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self.restore()

    def partition(self) -> None:
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def close(self) -> None:
        self.heal()
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._link, args=(listener, client), daemon=True).start()

    def _link(self, listener: socket.socket, client: socket.socket) -> None:
        self._flowing.wait()  # made during a partition: it reaches the server once healed
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            if self._listener is not listener:  # cut meanwhile
                client.close()
                upstream.close()
                return
            self._open.update((client, upstream))
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                self._flowing.wait()  # held during a partition
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
