"""Window calls on the wire: RESP packed by jobctl (:func:`_bulk`,
:func:`_packed`) and one pipelined round trip of ``EVALSHA`` calls
(:func:`pipelined`), for the window engine (:mod:`jobctl.ops.window`) and
the filtered plan's scan (:mod:`jobctl.layouts.reliable_list.predicate_plan`)."""

from __future__ import annotations

from typing import Any

__all__ = ["pipelined", "read_replies", "drain"]


def _bulk(value) -> bytes:
    """One RESP bulk string of ``value`` (bytes, str or int); raises
    TypeError for anything else (``None`` would go out as "None")."""
    if isinstance(value, bytes):
        b = value
    elif isinstance(value, (str, int)):
        b = str(value).encode("utf-8", "surrogateescape")
    else:
        raise TypeError(f"cannot send a {type(value).__name__} to Redis")
    return b"$%d\r\n%b\r\n" % (len(b), b)


def _packed(sha: str, calls: list[tuple[list[str], list]]) -> bytes:
    """The RESP of one ``EVALSHA sha`` per ``(keys, args)`` of ``calls``:
    hiredis's packer (C, ~0.1 µs an argument), or built here when it is
    missing or refuses a value (a ``str`` with surrogate escapes); redis-py's
    general encoder cost ~1 µs an argument, more than the server's work on a
    job."""
    try:
        from hiredis import pack_command

        return b"".join([pack_command(("EVALSHA", sha, len(keys), *keys, *args)) for keys, args in calls])
    except (ImportError, UnicodeEncodeError):
        pass
    head = _bulk("EVALSHA") + _bulk(sha)
    out: list[bytes] = []
    for keys, args in calls:
        out.append(b"*%d\r\n" % (3 + len(keys) + len(args)) + head + _bulk(len(keys)))
        out += map(_bulk, keys)
        out += map(_bulk, args)
    return b"".join(out)


def pipelined(client, window, calls: list[tuple[list[str], list]]) -> list[Any]:
    """Run the script ``window`` once per ``(keys, args)`` of ``calls`` in
    one round trip; each reply, or the error reply as an exception.

    On a client pinned to one connection (``single_connection_client``,
    :func:`jobctl.ops.engine._pinned`) the EVALSHAs are written and read on
    that connection itself, so a dropped connection ends the run (a pooled
    pipeline would silently reconnect).  A ``NOSCRIPT`` reply (the script
    cache was flushed: that call and the ones after it did not run) loads
    the script again and resends them.
    """
    import redis

    conn = getattr(client, "connection", None)
    if conn is None and len(calls) == 1:  # one call per round trip (--rate, layout.apply)
        keys, args = calls[0]
        try:
            return [window(keys=keys, args=args)]
        except redis.exceptions.ResponseError as exc:
            return [exc]
    if conn is None:
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            window(keys=keys, args=args, client=pipe)
        return pipe.execute(raise_on_error=False)
    conn.send_packed_command([_packed(window.sha, calls)], check_health=False)
    out = read_replies(client, conn, len(calls))
    for n, reply in enumerate(out):
        if isinstance(reply, redis.exceptions.NoScriptError):
            client.script_load(window.script)
            return out[:n] + pipelined(client, window, calls[n:])
    return out


def read_replies(client, conn, n: int, command: str = "EVALSHA") -> list[Any]:
    """The next ``n`` replies on ``conn`` (sent pipelined by the caller),
    each error reply as its ``ResponseError`` instead of raised."""
    import redis

    out: list[Any] = []
    for _ in range(n):
        try:
            out.append(client.parse_response(conn, command))
        except redis.exceptions.ResponseError as exc:
            out.append(exc)
    return out


def drain(inflight, recv, conn) -> None:
    """A walk stopped early (an error, or its caller closed it): read the
    replies of the round trips still in flight (``recv(rt)`` for each whose
    ``replies`` is None) so that the connection ``conn`` is clean for the
    restore; if a read fails, disconnect (the restore reconnects)."""
    for rt in inflight:
        if rt.replies is None:
            try:
                recv(rt)
            except Exception:  # noqa: BLE001 - the restore reconnects
                conn.disconnect()
                break
