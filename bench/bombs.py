"""Memory of two hostile inputs: a gzip bomb answered by a target, and an NDJSON
import of bare newlines.

- ``gzip``: one ``WebhookTarget.call`` (this process) to a loopback server answering
  ``--gzip-mib`` MiB of zeros gzipped (256 MiB: a 255 KiB body), status 500 then 200; the
  process's peak RSS (``ru_maxrss``) before and after each call.
- ``ndjson``: a real API process (uvicorn, ``create_app``) on a fresh database
  (``crondepot_bombs``, migrated, one tenant, dropped afterwards) is sent ``--ndjson-mib``
  MiB of ``\\n`` at ``/v1/import``; its ``VmRSS`` before and its ``VmHWM`` (peak) after.

    python bench/bombs.py [--admin-url URL] [--gzip-mib 256] [--ndjson-mib 32]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psycopg
from psycopg.conninfo import make_conninfo

from crondepot.db import connect, migrate
from crondepot.job.guard import AddressGuard
from crondepot.tenancy.tenants import create_tenant
from crondepot.worker.targets import WebhookCall, WebhookTarget

MiB = 1024 * 1024


def gzip_of_zeros(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = b"\0" * MiB
    return b"".join([*(packer.compress(zeros) for _ in range(mib)), packer.flush()])


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gzip_bomb(mib: int) -> None:
    bomb = gzip_of_zeros(mib)
    status = [500]

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status[0])
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the worker stopped reading, as it should
                self.wfile.write(bomb)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    with WebhookTarget(AddressGuard(["127.0.0.1/32"])) as target:
        for status[0] in (500, 200):
            before = peak_rss_mb()
            try:
                target.call(WebhookCall(url=url, run_id="r-1", body=b"{}", timeout_s=60,
                                        dedupes=False, signing_secret="whsec_" + "A" * 32))
                outcome = "ok"
            except Exception as exc:
                outcome = type(exc).__name__
            print(f"gzip bomb, HTTP {status[0]}: {len(bomb) / 1024:.0f} KiB on the wire, "
                  f"{mib} MiB inflated; worker peak RSS {before:.0f} MB before the call, "
                  f"{peak_rss_mb():.0f} MB after ({outcome})")
    server.shutdown()


def ndjson_newlines(admin_url: str, mib: int) -> None:
    name = "crondepot_bombs"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(admin_url, dbname=name)
    with connect(url) as conn:
        migrate(conn)
        token = create_tenant(conn, "bombs").token
    port = 18765
    api = subprocess.Popen([sys.executable, "-c", (
        "import uvicorn; from crondepot.api import create_app; "
        f"uvicorn.run(create_app({url!r}), host='127.0.0.1', port={port}, "
        "log_level='warning')")])

    def status(field: str) -> float:
        with open(f"/proc/{api.pid}/status") as lines:
            return next(int(line.split()[1]) for line in lines if line.startswith(field)) / 1024

    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(f"{base}/healthz")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
        httpx.get(f"{base}/v1/jobs", headers=headers)       # warm: a pooled connection
        before = status("VmRSS")
        started = time.perf_counter()
        answer = httpx.post(f"{base}/v1/import", content=b"\n" * (mib * MiB),
                            headers=headers, timeout=300)
        took = time.perf_counter() - started
        print(f"NDJSON import of {mib} MiB of bare newlines: HTTP {answer.status_code} in "
              f"{took:.2f} s; API RSS {before:.0f} MB before, peak {status('VmHWM'):.0f} MB")
    finally:
        api.terminate()
        api.wait()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--gzip-mib", type=int, default=256)
    parser.add_argument("--ndjson-mib", type=int, default=32)
    args = parser.parse_args()
    gzip_bomb(args.gzip_mib)
    ndjson_newlines(args.admin_url, args.ndjson_mib)


if __name__ == "__main__":
    main()
