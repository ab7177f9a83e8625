"""A target's answer is read safely: a bound on its *decoded* size (a gzip bomb costs
little) and a Retry-After hint read as ASCII digits only.

Network rule for this file: traffic goes to loopback only (``127.0.0.1/32`` allow-listed).
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest

from crondepot.base.errors import TemporaryError
from crondepot.job.guard import AddressGuard
from crondepot.worker.targets import WebhookCall, WebhookTarget
from tests.support.target_server import Route, TargetServer

MiB = 1024 * 1024
LOOPBACK_ONLY = AddressGuard(["127.0.0.1/32"])


def _gzip_of_zeros(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = b"\0" * MiB
    return b"".join([*(packer.compress(zeros) for _ in range(mib)), packer.flush()])


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer()
    yield srv
    srv.close()


def _call(url: str) -> WebhookCall:
    return WebhookCall(url=url, run_id="r-1", body=b"{}", timeout_s=10, dedupes=False,
                       signing_secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")


@pytest.mark.parametrize("status", [200, 500])
def test_a_gzip_bomb_answer_is_not_inflated_in_memory(server: TargetServer,
                                                      status: int) -> None:
    bomb = _gzip_of_zeros(64)           # ~64 KB on the wire, 64 MiB inflated
    server.routes["/hook"] = Route(status=status, headers={"Content-Encoding": "gzip"},
                                   body=bomb)
    with WebhookTarget(LOOPBACK_ONLY) as target:
        tracemalloc.start()
        try:
            if status == 200:
                assert target.call(_call(server.url())).status_code == 200
            else:
                with pytest.raises(TemporaryError, match="HTTP 500"):
                    target.call(_call(server.url()))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 4 * MiB, f"reading the answer allocated {peak / MiB:.0f} MiB at its peak"


def test_a_gzipped_error_body_is_still_quoted_decoded(server: TargetServer) -> None:
    server.routes["/hook"] = Route(status=503, headers={"Content-Encoding": "gzip"},
                                   body=gzip.compress(b"database is down"))
    with WebhookTarget(LOOPBACK_ONLY) as target, \
            pytest.raises(TemporaryError, match="database is down"):
        target.call(_call(server.url()))


def test_a_deflated_error_body_without_its_zlib_header_is_quoted(server: TargetServer) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw_deflate = packer.compress(b"queue full") + packer.flush()
    server.routes["/hook"] = Route(status=503, headers={"Content-Encoding": "deflate"},
                                   body=raw_deflate)
    with WebhookTarget(LOOPBACK_ONLY) as target, \
            pytest.raises(TemporaryError, match="queue full"):
        target.call(_call(server.url()))


@pytest.mark.parametrize("hint", ["²", "٣"], ids=["superscript-two", "arabic-three"])
def test_a_retry_after_of_non_ascii_digits_is_no_hint(server: TargetServer, hint: str) -> None:
    # "²".isdigit() is True and float("²") raises: the 503 was not classified at all
    # sent as its UTF-8 bytes (http.server writes headers as latin-1); httpx reads them
    # back as UTF-8, or as latin-1 for the lone byte 0xB2 of "²"
    on_wire = hint.encode().decode("latin-1") if hint != "²" else hint
    server.routes["/hook"] = Route(status=503, headers={"Retry-After": on_wire})
    with WebhookTarget(LOOPBACK_ONLY) as target, pytest.raises(TemporaryError) as caught:
        target.call(_call(server.url()))
    assert caught.value.retry_after_seconds is None


def test_an_error_body_reaches_the_run_as_a_short_text_excerpt(server: TargetServer) -> None:
    # What a tenant's target answers is copied into the run's last_error: a few hundred
    # characters of text, whatever the body's size or bytes.
    server.routes["/hook"] = Route(status=500, body=b"\x00\xff<html>" + b"x" * MiB)
    with WebhookTarget(LOOPBACK_ONLY) as target, pytest.raises(TemporaryError) as caught:
        target.call(_call(server.url()))
    message = str(caught.value)
    assert message.startswith(f"HTTP 500 from {server.url()}: '\\x00\ufffd<html>xxx")
    assert len(message) < 300 + len(server.url())
