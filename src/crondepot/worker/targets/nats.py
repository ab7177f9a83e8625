"""The ``nats`` target: publish the run's message to a NATS JetStream subject.

The publish carries ``Nats-Msg-Id`` = the run id, and waits for the stream's
acknowledgement (PubAck): a run succeeds only when a stream has stored the message (with
tracing on, the call span's W3C ``traceparent`` is a message header). Within
the stream's duplicate window (``duplicate_window``, two minutes by default: set it longer
than a run's lease) a second publish with the same id is acknowledged as a duplicate and
not stored, so this target deduplicates by construction: a timed-out publish is retried
(TemporaryError), and a worker killed between publish and record leaves one message.

nats-py is asyncio: the worker's slots are threads, so one event loop thread per worker
runs every publish, on one client per connection URL (nats-py multiplexes it and reconnects
by itself after a server restart; a client found closed is replaced).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client

from crondepot.base.errors import PermanentError, TemporaryError
from crondepot.runtime import tracing
from crondepot.worker.targets.base import TargetSetup
from crondepot.worker.targets.broker import message

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun

log = logging.getLogger("crondepot.worker")


async def _connection_error(exc: Exception) -> None:
    # nats-py's own logs a traceback for every failed reconnect (twice a second while a
    # server is down); the runs that failed meanwhile carry their own errors
    log.warning("nats connection: %s %s", type(exc).__name__, exc)


class NatsTarget:
    kind = "nats"

    def __init__(self, setup: TargetSetup) -> None:
        self._urls = setup.connections
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="crondepot-nats")
        self._thread.start()
        self._clients: dict[str, Client] = {}
        self._connecting = asyncio.Lock()   # used on the loop thread only

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        target = run.target
        url = self._urls(str(target["connection"]))
        timeout = float(target.get("timeout_s", 10))
        # read in the slot's thread, where the call's span is current, not the loop's
        trace_headers = tracing.headers()
        future = asyncio.run_coroutine_threadsafe(
            self._publish(url, str(target["subject"]), run, tenant, timeout, trace_headers),
            self._loop)
        try:
            return future.result(timeout + 5)
        except TimeoutError:
            future.cancel()
            raise TemporaryError(f"nats: no acknowledgement within {timeout:g} s "
                                 "(safe to retry: the stream drops a repeat)") from None

    def close(self) -> None:
        """Close the connections and stop the loop's thread. A client left open keeps
        reconnecting (and logging it) for as long as the process lives, whatever became of
        its server."""
        async def drain() -> None:
            for client in list(self._clients.values()):
                with contextlib.suppress(Exception):
                    await client.close()
            self._clients.clear()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _client(self, url: str) -> Client:
        async with self._connecting:
            client = self._clients.get(url)
            if client is None or client.is_closed:
                client = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=-1,
                                            reconnect_time_wait=0.5,
                                            error_cb=_connection_error)
                self._clients[url] = client
            return client

    async def _publish(self, url: str, subject: str, run: ClaimedRun, tenant: str,
                       timeout: float, trace_headers: Mapping[str, str]) -> dict[str, Any]:
        try:
            client = await self._client(url)
            ack = await client.jetstream().publish(
                subject, message(run), timeout=timeout,
                headers={"Nats-Msg-Id": run.run_id, "Crondepot-Tenant": tenant,
                         "Content-Type": "application/json", **trace_headers})
        except nats.js.errors.NoStreamResponseError:
            raise await _no_stream(client, subject) from None
        except nats.js.errors.APIError as exc:
            raise TemporaryError(f"nats: JetStream refused the message: {exc}") from None
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            # Dedupes by construction: whatever reached the stream, a retry stores it once.
            raise TemporaryError(f"nats: {type(exc).__name__} {exc} (safe to retry: the "
                                 "stream drops a repeat)") from None
        return {"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)}


async def _no_stream(client: Client, subject: str) -> Exception:
    """Nothing answered the publish. It fails for good only when JetStream says no stream
    captures the subject: a server that has just restarted accepts clients before JetStream
    has recovered its streams, and a publish then has no responder either (retried)."""
    try:
        await client.jetstream().find_stream_name_by_subject(subject)
    except nats.js.errors.NotFoundError:
        return PermanentError(f"nats: no JetStream stream captures subject {subject!r}")
    except (TimeoutError, nats.errors.Error, OSError) as exc:
        return TemporaryError(f"nats: JetStream does not answer ({type(exc).__name__}); "
                              "retried (the stream drops a repeat)")
    return TemporaryError(f"nats: the stream capturing {subject!r} did not answer; retried "
                          "(the stream drops a repeat)")


def make(setup: TargetSetup) -> NatsTarget:
    return NatsTarget(setup)
