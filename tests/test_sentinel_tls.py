"""A TLS Sentinel whose certificate the client does not trust: the one-line
error names the certificate failure (exit 3), not only "no Sentinel
answered"."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

import cluster_servers as cs
from jobctl.cli.main import main


@pytest.fixture
def tls_sentinel(pytestconfig):
    """A plain primary and a Sentinel listening on TLS only (the fixture CA's
    certificate); yields ``(sentinel TLS port, certs)``."""
    binary = shutil.which("redis-server")
    if not binary or not shutil.which("openssl"):
        pytest.skip("needs redis-server and openssl on PATH")
    root = Path(tempfile.mkdtemp(prefix="jobctl-tls-sentinel-"))
    certs = cs.make_certs(root / "certs")
    p_port, s_port = cs._free_ports(2)
    primary = cs._launch(binary, cs._base_args(p_port, root / "primary"), p_port, root / "primary")
    sdir = root / "sentinel"
    sdir.mkdir()
    (sdir / "sentinel.conf").write_text("\n".join([
        "port 0", f"tls-port {s_port}", "bind 127.0.0.1", f"dir {sdir}",
        f"tls-cert-file {certs['server_cert']}", f"tls-key-file {certs['server_key']}",
        f"tls-ca-cert-file {certs['ca']}", "tls-auth-clients no",
        f"sentinel monitor {cs.SENTINEL_SERVICE} 127.0.0.1 {p_port} 1",
    ]) + "\n")
    sentinel = cs._launch(binary, [str(sdir / "sentinel.conf"), "--sentinel"], s_port, sdir, ping=False)
    cs.wait_until(lambda: (sdir / "server.log").read_text(errors="replace").count("Sentinel ID") > 0
                  or sentinel.proc.poll() is not None, what="TLS Sentinel start")
    if sentinel.proc.poll() is not None:
        primary.stop()
        pytest.skip("redis-server has no TLS support here")
    yield s_port, certs
    sentinel.stop()
    primary.stop()


def test_a_sentinel_certificate_not_trusted_is_named(tls_sentinel, tmp_path, capsys):
    port, _ = tls_sentinel
    other = cs.make_certs(tmp_path / "other")  # a CA that did not sign the Sentinel's certificate
    code = main(["--url", f"rediss+sentinel://127.0.0.1:{port}/{cs.SENTINEL_SERVICE}/0",
                 "--ca-cert", str(other["ca"]), "status"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.count("\n") == 1 and "certificate" in err.lower(), err
