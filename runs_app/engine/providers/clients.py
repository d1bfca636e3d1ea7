"""HTTP clients of the providers, built once and shared: one per settings and process.

Building an `openai.OpenAI` (or `anthropic.Anthropic`) client costs an SSL context and a TCP
connection; building one per call made every call open a connection and spend ~50 ms of CPU.
So clients live here, keyed by what they are built from: (base URL, API key, timeout). The key
is part of the cache key because it is read from the environment at call time: a rotated key
gets a client of its own.

Async clients are keyed by the running event loop too: an httpx connection pool belongs to the
loop that opened its connections, and using it from another loop fails ("Event loop is closed").
They are held weakly by loop, so a loop's clients go away with the loop.

A forked child starts with empty caches (the parent's connections are not the child's to use).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

ClientKey = tuple[str, str, float]  # (base_url, api_key, timeout_secs)
S = TypeVar("S")
A = TypeVar("A")

# Settings × keys in use at once stay few; the bound only keeps key rotations from piling up.
MAX_CLIENTS = 64


class ClientCache(Generic[S, A]):
    """Clients of one provider family: `build_sync(key)` and `build_async(key)` make them."""

    def __init__(self, build_sync: Callable[[ClientKey], S], build_async: Callable[[ClientKey], A]) -> None:
        self._build_sync = build_sync
        self._build_async = build_async
        self._lock = threading.Lock()
        self._sync: OrderedDict[ClientKey, S] = OrderedDict()
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict[ClientKey, A]] = (
            weakref.WeakKeyDictionary()
        )
        _caches.add(self)

    def sync_client(self, key: ClientKey) -> S:
        with self._lock:
            return _get(self._sync, key, self._build_sync)

    def async_client(self, key: ClientKey) -> A:
        """The client for `key` on the running event loop (RuntimeError outside of one)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            clients = self._async.get(loop)
            if clients is None:
                clients = self._async[loop] = OrderedDict()
            return _get(clients, key, self._build_async)

    def clear(self) -> None:
        """Forget every client (they are not closed: a call in flight may still hold one)."""
        with self._lock:
            self._sync.clear()
            self._async = weakref.WeakKeyDictionary()


def _get(clients: OrderedDict[ClientKey, S], key: ClientKey, build: Callable[[ClientKey], S]) -> S:
    client = clients.get(key)
    if client is None:
        client = clients[key] = build(key)
        if len(clients) > MAX_CLIENTS:
            # Not closed: a call may still be using it; its connections close when it is collected.
            clients.popitem(last=False)
    else:
        clients.move_to_end(key)
    return client


_caches: weakref.WeakSet[ClientCache[Any, Any]] = weakref.WeakSet()


def _forget_after_fork() -> None:
    for cache in list(_caches):
        # A lock that fork() copied while another thread held it would never be released.
        cache._lock = threading.Lock()
        cache.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
