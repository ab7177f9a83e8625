"""The ``redis`` target: add the run's message to a Redis stream with ``XADD``.

One Lua script, atomic on the server, sets a guard key named after the run id (``SET NX``
with an expiry of ``GUARD_SECONDS``) and adds the entry only if it set the key: a repeat of
the run (a retry after a lost reply, a worker killed between publish and record) adds
nothing. So the target deduplicates: any error is retried (TemporaryError). The entry holds
``run_id`` and ``body`` (the webhook's JSON document), and with tracing on a ``traceparent``
field (the call span's W3C trace context; after ``body``: ARGV[4] on, as name, value).

One client per connection URL (redis-py's is thread-safe over its own connection pool, and
reconnects after a server restart).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from crondepot.base.errors import PermanentError, TemporaryError
from crondepot.runtime import tracing
from crondepot.worker.targets.base import TargetSetup
from crondepot.worker.targets.broker import message

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun

# How long a run id is remembered: longer than any retry of a run (a week of backoff).
GUARD_SECONDS = 7 * 24 * 3600
# The stream's type is checked first: a script that errs after its SET keeps the SET
# (Redis does not roll a script back), which would make the run's retry add nothing.
PUBLISH = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'stream' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. kind .. ', not a stream')
end
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', tonumber(ARGV[2])) then
  return redis.call('XADD', KEYS[1], '*', 'run_id', ARGV[1], 'body', ARGV[3],
                    unpack(ARGV, 4))
end
return false
"""


def guard_key(run_id: str) -> str:
    return f"crondepot:run:{run_id}"


class RedisTarget:
    kind = "redis"

    def __init__(self, setup: TargetSetup) -> None:
        self._urls = setup.connections
        self._clients: dict[str, redis.Redis] = {}
        self._lock = threading.Lock()

    def _client(self, url: str, timeout: float) -> redis.Redis:
        with self._lock:
            client = self._clients.get(url)
            if client is None:
                client = redis.Redis.from_url(url, socket_timeout=timeout,
                                              socket_connect_timeout=timeout,
                                              health_check_interval=30)
                self._clients[url] = client
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            with contextlib.suppress(Exception):   # a broker already gone: nothing to close
                client.close()

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        target = run.target
        stream = str(target["stream"])
        timeout = float(target.get("timeout_s", 10))
        client = self._client(self._urls(str(target["connection"])), timeout)
        try:
            entry = client.eval(PUBLISH, 2, stream, guard_key(run.run_id), run.run_id,
                                GUARD_SECONDS, message(run),
                                *(part for pair in tracing.headers().items() for part in pair))
        except redis.exceptions.ResponseError as exc:
            raise PermanentError(f"redis: {exc}") from None
        except redis.exceptions.RedisError as exc:
            raise TemporaryError(f"redis: {type(exc).__name__} {exc} (safe to retry: a "
                                 "repeat adds no entry)") from None
        if entry is None:
            return {"stream": stream, "duplicate": True}
        entry_id = entry.decode() if isinstance(entry, bytes) else str(entry)
        return {"stream": stream, "entry_id": entry_id, "duplicate": False}


def make(setup: TargetSetup) -> RedisTarget:
    return RedisTarget(setup)
