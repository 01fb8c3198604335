"""RESP on the wire for the walk driver: the only code in jobctl that packs
commands by hand and sends them (:class:`Wire`).

redis-py's general encoder costs ~1 µs an argument, more than the server's
work on a job, so the bulk paths pack their commands here (hiredis's C
packer when it takes the values) and send them pipelined on one connection.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bulk", "bulks", "pairs_blob", "job_blob", "packed_evalsha", "key_blob", "command_blob", "keyed_command",
           "keyed_evalsha", "per_key_blob", "texts", "text", "Wire"]


def text(v: Any) -> str:
    """``v`` (bytes or anything else) as a str (bytes surrogate-escaped)."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def bulk(value) -> bytes:
    """One RESP bulk string of ``value`` (bytes, str or int); raises
    TypeError for anything else (``None`` would go out as "None")."""
    if isinstance(value, bytes):
        b = value
    elif isinstance(value, (str, int)):
        b = str(value).encode("utf-8", "surrogateescape")
    else:
        raise TypeError(f"cannot send a {type(value).__name__} to Redis")
    return b"$%d\r\n%b\r\n" % (len(b), b)


def pairs_blob(values: list[bytes], names: list[str]) -> bytes:
    """The RESP bulk strings ``values[0], names[0], values[1], names[1], ...``
    (each name UTF-8, surrogate-escaped, as :func:`bulk` sends a str): one
    format a pair, about half the time of :func:`bulk` on each."""
    encoded = [n.encode("utf-8", "surrogateescape") for n in names]
    return b"".join([b"$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(v), v, len(n), n) for v, n in zip(values, encoded)])


def job_blob(key: bytes, job_id: bytes, position: int, sha: bytes | None) -> tuple[bytes, bytes]:
    """A per-job call's parts of one job, as :func:`bulk` sends them: its
    key, and its arguments ``job_id, position, "", sha`` (no ``sha``:
    ``None``), each in one format."""
    at = b"%d" % position
    if sha is None:
        args = b"$%d\r\n%b\r\n$%d\r\n%b\r\n$0\r\n\r\n" % (len(job_id), job_id, len(at), at)
    else:
        args = b"$%d\r\n%b\r\n$%d\r\n%b\r\n$0\r\n\r\n$%d\r\n%b\r\n" % (len(job_id), job_id, len(at), at,
                                                                            len(sha), sha)
    return b"$%d\r\n%b\r\n" % (len(key), key), args


def command_blob(*parts) -> bytes:
    """One command (``parts``: bytes, str or int) as RESP."""
    return b"*%d\r\n" % len(parts) + b"".join(map(bulk, parts))


def packed_evalsha(sha: str, calls: list[tuple[list[str], list]]) -> list[bytes]:
    """The RESP of one ``EVALSHA sha`` per ``(keys, args)`` of ``calls``, a
    blob per call: hiredis's packer (C, ~0.1 µs an argument), or built here
    when it is missing or refuses a value (a ``str`` with surrogate escapes)."""
    try:
        from hiredis import pack_command

        return [pack_command(("EVALSHA", sha, len(keys), *keys, *args)) for keys, args in calls]
    except (ImportError, UnicodeEncodeError):
        pass
    head = bulk("EVALSHA") + bulk(sha)
    return [b"".join([b"*%d\r\n" % (3 + len(keys) + len(args)), head, bulk(len(keys)), *map(bulk, keys),
                      *map(bulk, args)]) for keys, args in calls]


def key_blob(prefix: bytes, ids: list[bytes]) -> bytes:
    """The RESP bulk strings of ``prefix + id`` for each id, built at C speed
    (one join when every id has the same length, as generated ids do)."""
    pl = len(prefix)
    lengths = set(map(len, ids))
    if len(lengths) == 1:
        size = pl + lengths.pop()
        return b"$%d\r\n%b" % (size, prefix) + (b"\r\n$%d\r\n%b" % (size, prefix)).join(ids) + b"\r\n"
    return b"".join([b"$%d\r\n%b%b\r\n" % (pl + len(x), prefix, x) for x in ids])


def bulks(values) -> bytes:
    """The RESP bulk strings of ``values``, joined (a part of a command)."""
    return b"".join(map(bulk, values))


def keyed_command(command: str, prefix: bytes, ids: list[bytes]) -> bytes:
    """``command prefix+id...`` (one key per id of ``ids``) as RESP."""
    return b"*%d\r\n" % (1 + len(ids)) + bulk(command) + key_blob(prefix, ids)


def keyed_evalsha(head: bytes, prefix: bytes, ids: list[bytes], args: bytes, nargs: int) -> bytes:
    """One ``EVALSHA`` (``head``: :func:`bulks` of ``("EVALSHA", sha)``) whose
    KEYS are ``prefix + id`` for each of ``ids`` and whose ARGV is ``args``
    (``nargs`` bulk strings, :func:`bulks`)."""
    return b"".join([b"*%d\r\n" % (3 + len(ids) + nargs), head, bulk(len(ids)), key_blob(prefix, ids), args])


def per_key_blob(command: str, prefix: bytes, ids: list[bytes], args: tuple = ()) -> bytes:
    """One ``command prefix+id *args`` per id of ``ids``, as one RESP blob."""
    head = b"*%d\r\n" % (2 + len(args)) + bulk(command)
    tail = b"".join(map(bulk, args))
    pl = len(prefix)
    return b"".join([b"%b$%d\r\n%b%b\r\n%b" % (head, pl + len(x), prefix, x, tail) for x in ids])


def texts(ids: list[bytes]) -> list[str]:
    """``ids`` decoded (surrogate-escaped), in one join/decode/split when no
    id holds a newline."""
    if not ids:
        return []
    blob = b"\n".join(ids)
    if blob.count(b"\n") == len(ids) - 1:
        return blob.decode("utf-8", "surrogateescape").split("\n")
    return [text(x) for x in ids]


class Wire:
    """One client's own connection (``client.connection``: a
    ``single_connection_client``) written and read directly, so a dropped
    connection ends the walk (a pooled pipeline would silently reconnect).
    Replies are read with ``client.parse_response`` (redis-py's reply
    callbacks)."""

    def __init__(self, client) -> None:
        self.client = client
        self.conn = getattr(client, "connection", None)

    @property
    def own(self) -> bool:
        """Whether the client has a connection of its own (else: send nothing here)."""
        return self.conn is not None

    def send(self, blobs: list[bytes]) -> None:
        """Write the commands ``blobs`` (RESP) in one write, replies unread."""
        self.conn.send_packed_command([b"".join(blobs)], check_health=False)

    def reply(self, command: str = "EVALSHA") -> Any:
        """The next reply (an error reply raised as ``ResponseError``)."""
        return self.client.parse_response(self.conn, command)

    def replies(self, n: int, command: str = "EVALSHA") -> list[Any]:
        """The next ``n`` replies, each error reply as its ``ResponseError``
        instead of raised."""
        import redis

        out: list[Any] = []
        for _ in range(n):
            try:
                out.append(self.client.parse_response(self.conn, command))
            except redis.exceptions.ResponseError as exc:
                out.append(exc)
        return out

    def raw_replies(self, n: int) -> list[Any]:
        """The next ``n`` replies without redis-py's callbacks (``read_response``),
        each error reply as its ``ResponseError``."""
        import redis

        out: list[Any] = []
        for _ in range(n):
            try:
                out.append(self.conn.read_response())
            except redis.exceptions.ResponseError as exc:
                out.append(exc)
        return out

    def disconnect(self) -> None:
        """Drop the connection (replies may be unread: the next command reconnects)."""
        if self.conn is not None:
            self.conn.disconnect()
