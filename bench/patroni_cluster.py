"""A Patroni cluster on loopback for failover runs (``bench/chaos.py --failover``).

One etcd and two (or more) PostgreSQL 15 nodes, each run by its own Patroni, all from
Debian's packages (``apt-get install patroni etcd-server postgresql-15``), under the
``postgres`` system user (PostgreSQL refuses root), in a temporary folder. Configured from the
reference deployment's files (``deploy/patroni/patroni.yml``, ``deploy/etcd/etcd.conf.yml``,
``crondepot_testkit.deploy``), with only this machine's addresses, ports and folders put in:
synchronous replication (``synchronous_mode`` and ``synchronous_mode_strict``) unless asked
otherwise, and crondepot on the shipped multi-host URL (``target_session_attrs=read-write``),
as design §9 says a deployment does.

Each node reaches etcd through its own loopback address (127.0.0.2, 127.0.0.3, ...), and
etcd listens on all of them: a partition of one node (``partition``) drops its PostgreSQL
port, its REST port and its own way to etcd, so the cut-off node is isolated as a failed
link would isolate it, while the others still see etcd.

The fault events are the ones an operator meets: a kill -9 of the primary's postmaster, a
planned switchover, a kill -9 of the leader's Patroni (a supervisor starts it again, as
systemd's ``Restart=always`` would), a partition of the primary, an etcd outage.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from crondepot_testkit import deploy
from crondepot_testkit.processes import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"


def available() -> str | None:
    """None when a cluster can be started here, else what is missing."""
    missing = [exe for exe in ("patroni", "patronictl", "etcd", "iptables")
               if shutil.which(exe) is None]
    if not (PG_BIN / "postgres").exists():
        missing.append(str(PG_BIN / "postgres"))
    if os.geteuid() != 0:
        missing.append("root (to run nodes as postgres and to drop packets)")
    return ", ".join(missing) or None


@dataclass
class Node:
    name: str
    pg_port: int
    rest_port: int
    etcd_host: str               # the loopback address this node reaches etcd through
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.folder / "patroni.log"

    @property
    def config(self) -> Path:
        return self.folder / "patroni.yml"

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def role(self) -> str | None:
        """'primary', 'replica', or None when its REST API does not answer."""
        try:
            answer = httpx.get(f"http://127.0.0.1:{self.rest_port}/patroni", timeout=1.0)
            if answer.status_code != 200:
                return None
            role = str(answer.json().get("role"))
            return "primary" if role == "master" else role     # Patroni 3.0 says master
        except (httpx.HTTPError, ValueError):
            return None

    @property
    def url(self) -> str:
        """This node alone (the failover run's write probe asks each node directly)."""
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/postgres"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


# Patroni's leader-key ttl unless asked otherwise (``ttl``): with loop_wait 1 s and
# retry_timeout 4 s, any ttl from 9 s up keeps loop_wait + 2 * retry_timeout <= ttl.
DEFAULT_TTL = 10


class PatroniCluster:
    def __init__(self, nodes: int = 2, *, synchronous: bool = True, strict: bool = True,
                 ttl: int = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self.root = Path(tempfile.mkdtemp(prefix="crondepot-patroni-"))
        os.chmod(self.root, 0o777)
        self.synchronous = synchronous
        self.strict = synchronous and strict
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.nodes = [Node(f"node{i}", free_port(), free_port(), f"127.0.0.{i + 1}",
                           self.root / f"node{i}") for i in range(1, nodes + 1)]
        self._partition_rules: list[list[str]] = []

    # -- life ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The shipped multi-host URL (deploy/env/crondepot.env) on this cluster's nodes."""
        return deploy.database_url([f"127.0.0.1:{n.pg_port}" for n in self.nodes],
                                   user="postgres", dbname="postgres")

    def start(self) -> None:
        self.start_etcd()
        for node in self.nodes:
            node.folder.mkdir(mode=0o700)
            shutil.chown(node.folder, USER, USER)
            node.config.write_text(json.dumps(self._config(node), indent=2))
        self.start_patroni(self.nodes[0])
        self.wait_for(lambda: self.leader() is not None, 90, "the first primary")
        for node in self.nodes[1:]:
            self.start_patroni(node)
        self.wait_for(self.replicating, 120, "the replicas to stream")

    def start_etcd(self) -> None:
        """One etcd member from deploy/etcd/etcd.conf.yml, listening on every node's own
        loopback address (the module's docstring)."""
        hosts = ["127.0.0.1", *(n.etcd_host for n in self.nodes)]
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        config = self.root / "etcd.conf.yml"
        config.write_text(deploy.render(deploy.ETCD, {
            "ETCD_NAME": "etcd1", "ETCD_DATA_DIR": str(self.root / "etcd"),
            "ETCD_LISTEN_CLIENT_URLS": ",".join(f"http://{h}:{self.etcd_port}" for h in hosts),
            "ETCD_ADVERTISE_CLIENT_URLS": f"http://127.0.0.1:{self.etcd_port}",
            "ETCD_LISTEN_PEER_URLS": peer, "ETCD_ADVERTISE_PEER_URLS": peer,
            "ETCD_INITIAL_CLUSTER": f"etcd1={peer}"}))
        log = (self.root / "etcd.log").open("ab")
        self.etcd = subprocess.Popen(["etcd", "--config-file", str(config)],
                                     stdout=log, stderr=subprocess.STDOUT)
        self.wait_for(self._etcd_healthy, 30, "etcd")

    def _etcd_healthy(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.etcd_port}/health",
                             timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def start_patroni(self, node: Node) -> None:
        log = node.log.open("ab")
        node.process = subprocess.Popen(["patroni", str(node.config)], user=USER,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        cwd=node.folder)

    def _config(self, node: Node) -> dict[str, Any]:
        """deploy/patroni/patroni.yml for ``node``: its addresses, ports and folders, and
        trust on loopback (this cluster's crondepot connects without a password). The
        DCS settings, the PostgreSQL parameters and the tags are the file's, unchanged;
        ``--async`` and ``--not-strict`` alone override the synchronous modes."""
        config = deploy.render_yaml(deploy.PATRONI, {
            "NODE_NAME": node.name,
            "REST_LISTEN": f"127.0.0.1:{node.rest_port}",
            "REST_ADDRESS": f"127.0.0.1:{node.rest_port}",
            "ETCD_HOSTS": f"{node.etcd_host}:{self.etcd_port}",
            "PG_LISTEN": f"127.0.0.1:{node.pg_port}",
            "PG_ADDRESS": f"127.0.0.1:{node.pg_port}",
            "DATA_DIR": str(node.data), "PGPASS": str(node.folder / "pgpass"),
            "SOCKET_DIR": str(node.folder), "CLIENT_NETWORK": "127.0.0.1/32",
            "SUPERUSER_PASSWORD": "x", "REPLICATION_PASSWORD": "x", "REWIND_PASSWORD": "x"})
        hba = ["local all all trust", "host all all 127.0.0.1/32 trust",
               "host replication all 127.0.0.1/32 trust"]
        config["bootstrap"]["pg_hba"] = config["postgresql"]["pg_hba"] = hba
        dcs = config["bootstrap"]["dcs"]
        dcs["ttl"] = self.ttl       # the file's 10 s unless a run asks for another
        if not self.synchronous:
            dcs["synchronous_mode"] = dcs["synchronous_mode_strict"] = False
        elif not self.strict:
            dcs["synchronous_mode_strict"] = False
        return config

    def destroy(self) -> None:
        self.heal()
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGKILL)
                node.process.wait(timeout=10)
            pid = node.postmaster_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGQUIT)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.send_signal(signal.SIGCONT)
            self.etcd.kill()
            self.etcd.wait(timeout=10)
        time.sleep(1)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- state ---------------------------------------------------------------------------

    def leader(self) -> Node | None:
        primaries = [n for n in self.nodes if n.role() == "primary"]
        return primaries[0] if len(primaries) == 1 else None

    def replicating(self) -> bool:
        leader = self.leader()
        if leader is None:
            return False
        try:
            members = httpx.get(f"http://127.0.0.1:{leader.rest_port}/cluster",
                                timeout=2.0).json()["members"]
        except (httpx.HTTPError, ValueError, KeyError):
            return False
        # In synchronous mode a replica counts once Patroni has made it the sync standby:
        # before that a commit waits for no one, and a switchover to it is refused.
        roles = ("sync_standby",) if self.synchronous else ("replica", "sync_standby")
        streaming = [m for m in members if m.get("role") in roles
                     and m.get("state") in ("streaming", "running")]
        return len(streaming) == len(self.nodes) - 1

    @staticmethod
    def wait_for(condition: Any, seconds: float, what: str) -> float:
        began = time.time()
        while time.time() - began < seconds:
            if condition():
                return time.time() - began
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {seconds:g} s waiting for {what}")

    def wait_for_primary(self, seconds: float = 120, *, other_than: Node | None = None
                         ) -> tuple[Node, float]:
        """The primary once there is exactly one (and not ``other_than``), and the wait."""
        found: list[Node] = []

        def one() -> bool:
            leader = self.leader()
            if leader is not None and leader is not other_than:
                found[:] = [leader]
                return True
            return False

        waited = self.wait_for(one, seconds, "a primary")
        return found[0], waited

    # -- faults --------------------------------------------------------------------------

    def kill_postmaster(self, node: Node) -> None:
        pid = node.postmaster_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)

    def switchover(self, leader: Node, candidate: Node) -> None:
        scope = json.loads(leader.config.read_text())["scope"]
        done = subprocess.run(["patronictl", "-c", str(leader.config), "switchover", scope,
                               "--leader", leader.name, "--candidate", candidate.name,
                               "--force"], user=USER, capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0 or "failed" in done.stdout.lower():
            raise RuntimeError(f"patronictl switchover: {done.stdout.strip()} "
                               f"{done.stderr.strip()}")

    def kill_patroni(self, node: Node) -> None:
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(timeout=10)

    def _rules(self, node: Node) -> list[list[str]]:
        rules = []
        for port in (node.pg_port, node.rest_port):
            rules += [["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
                      ["INPUT", "-i", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP"]]
        rules += [["INPUT", "-i", "lo", "-p", "tcp", "-d", node.etcd_host, "--dport",
                   str(self.etcd_port), "-j", "DROP"],
                  ["INPUT", "-i", "lo", "-p", "tcp", "-s", node.etcd_host, "--sport",
                   str(self.etcd_port), "-j", "DROP"]]
        return rules

    def partition(self, node: Node) -> None:
        for rule in self._rules(node):
            subprocess.run(["iptables", "-I", *rule], check=True, timeout=30)
            self._partition_rules.append(rule)

    def heal(self) -> None:
        for rule in self._partition_rules:
            subprocess.run(["iptables", "-D", *rule], check=False, timeout=30)
        self._partition_rules = []

    def etcd_pause(self) -> None:
        assert self.etcd is not None
        self.etcd.send_signal(signal.SIGSTOP)

    def etcd_resume(self) -> None:
        assert self.etcd is not None
        self.etcd.send_signal(signal.SIGCONT)


@contextlib.contextmanager
def cluster(nodes: int = 2, *, synchronous: bool = True, strict: bool = True,
            ttl: int = DEFAULT_TTL) -> Iterator[PatroniCluster]:
    made = PatroniCluster(nodes, synchronous=synchronous, strict=strict, ttl=ttl)
    try:
        made.start()
        yield made
    finally:
        made.destroy()
