"""The server a message, prompt or journal entry names: its URL without the
password, and with the scheme the client really uses (TLS from flags)."""

from __future__ import annotations

import pytest

from jobctl.connection import Target
from jobctl.topology import TlsOptions


@pytest.mark.parametrize("url, tls, shown", [
    ("redis://:pw@h:6379/0", TlsOptions(), "redis://:***@h:6379/0"),
    ("redis://:pw@h:6379/0", TlsOptions(ca_cert="ca.pem"), "rediss://:***@h:6379/0"),
    ("redis://h:6379/0", TlsOptions(verify=False), "rediss://h:6379/0"),
    ("redis+cluster://h1:1,h2:2", TlsOptions(ca_cert="ca.pem"), "rediss+cluster://h1:1,h2:2"),
    ("rediss://h:6379/0", TlsOptions(ca_cert="ca.pem"), "rediss://h:6379/0"),
    ("unix:///tmp/r.sock", TlsOptions(), "unix:///tmp/r.sock"),
])
def test_the_shown_server_says_tls_when_flags_turned_it_on(url, tls, shown):
    assert Target(url=url, source="--url", tls=tls).display == shown
