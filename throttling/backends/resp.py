"""RESP, the Redis protocol, written by hand: bulk strings and whole commands."""


def bulk(value):
    """One RESP bulk string."""
    if isinstance(value, str):
        value = value.encode()
    elif isinstance(value, int):
        value = b"%d" % value
    return b"$%d\r\n%s\r\n" % (len(value), value)


def pack(*args):
    """A command as RESP."""
    return b"*%d\r\n%s" % (len(args), b"".join(map(bulk, args)))
