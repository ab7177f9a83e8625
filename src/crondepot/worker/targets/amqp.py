"""The ``amqp`` target: publish the run's message to a RabbitMQ exchange (AMQP 0-9-1).

Publisher confirms on every channel: a run succeeds only when the broker confirms the
message. Messages are persistent (delivery mode 2), ``message_id`` is the run id (with
tracing on, the call span's W3C ``traceparent`` is a message header), and the
publish is ``mandatory``: a message the exchange routes to no queue is returned, and the
attempt fails for good (retrying would be returned again; the job's routing is wrong).

Guarantee: at least once. AMQP has no publisher-side deduplication: a worker killed after
the broker took the message and before the outcome was recorded publishes it again when the
run is retried after its lease, so a consumer deduplicates on ``message_id`` (the run id).
A connection lost while waiting for the confirm is ``OutcomeUnknown`` (the run is not
retried automatically: the dead letter shows it), as for a webhook that does not dedupe.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pika
import pika.exceptions as amqp_errors
from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection

from crondepot.base.errors import PermanentError, TemporaryError
from crondepot.runtime import tracing
from crondepot.worker.targets.base import OutcomeUnknown, TargetSetup
from crondepot.worker.targets.broker import Clients, message

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun

log = logging.getLogger("crondepot.worker")

_Client = tuple[BlockingConnection, BlockingChannel]


def _connect(url: str, timeout: float) -> _Client:
    """A connection with a confirm channel; ``timeout`` (the target's ``timeout_s``, that of
    the run that made it) bounds connecting and a connection the broker blocks (RabbitMQ's
    flow control), after which a publish fails and the connection is dropped."""
    params = pika.URLParameters(url)
    params.socket_timeout = timeout
    params.blocked_connection_timeout = timeout
    params.connection_attempts = 1
    conn = pika.BlockingConnection(params)
    channel = conn.channel()
    channel.confirm_delivery()
    return conn, channel


def _usable(client: _Client) -> bool:
    conn, channel = client
    if not (conn.is_open and channel.is_open):
        return False
    try:
        conn.process_data_events(0)     # reads a pending close, or the end of the socket
    except (amqp_errors.AMQPError, OSError):
        return False
    return bool(conn.is_open and channel.is_open)


def _close(client: _Client) -> None:
    if client[0].is_open:
        client[0].close()


class AmqpTarget:
    kind = "amqp"

    def __init__(self, setup: TargetSetup) -> None:
        self._urls = setup.connections
        self._clients: Clients[_Client] = Clients(_close)

    def close(self) -> None:
        self._clients.close_all()

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        target = run.target
        url = self._urls(str(target["connection"]))
        timeout = float(target.get("timeout_s", 10))
        try:
            client = self._clients.take(url, lambda: _connect(url, timeout))
            if not _usable(client):
                # A pooled connection the broker closed or lost while idle (a restart): a
                # new one now, rather than a publish on it that could not tell whether the
                # message left.
                self._clients.close(client)
                client = _connect(url, timeout)
        except (amqp_errors.AMQPError, OSError) as exc:
            raise TemporaryError(f"amqp connection {target['connection']}: cannot connect: "
                                 f"{type(exc).__name__} {exc}") from None
        _, channel = client
        properties = pika.BasicProperties(
            content_type="application/json", delivery_mode=2, message_id=run.run_id,
            headers={"crondepot-tenant": tenant, **tracing.headers()})
        try:
            channel.basic_publish(str(target["exchange"]), str(target["routing_key"]),
                                  message(run), properties=properties, mandatory=True)
        except amqp_errors.UnroutableError:
            # The broker confirmed the return: the channel is still good.
            self._clients.give(url, client)
            raise PermanentError(
                f"amqp: exchange {target['exchange']!r} routed key "
                f"{target['routing_key']!r} to no queue (returned unroutable)") from None
        except amqp_errors.NackError:
            self._clients.give(url, client)
            raise TemporaryError("amqp: the broker refused the message (nack)") from None
        except amqp_errors.ChannelClosedByBroker as exc:
            self._clients.close(client)
            if exc.reply_code == 404:
                raise PermanentError(f"amqp: {exc.reply_text}") from None
            raise TemporaryError(f"amqp: channel closed by the broker: {exc.reply_code} "
                                 f"{exc.reply_text}") from None
        except (amqp_errors.AMQPError, OSError) as exc:
            # Lost mid-publish (an idle pooled connection was checked above): the message may
            # or may not have been queued, and AMQP would not drop a repeat.
            self._clients.close(client)
            raise OutcomeUnknown(f"amqp: connection lost before the broker confirmed "
                                 f"({type(exc).__name__}); the message may be queued"
                                 ) from None
        except BaseException:
            self._clients.close(client)
            raise
        self._clients.give(url, client)
        return {"exchange": target["exchange"], "routing_key": target["routing_key"]}


def make(setup: TargetSetup) -> AmqpTarget:
    return AmqpTarget(setup)
