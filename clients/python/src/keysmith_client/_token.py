"""The bearer token, checked once when a client is made (never printed)."""

from __future__ import annotations

import os
from typing import Optional, Union

#: A file path, as ``open`` takes them.
PathLike = Union[str, "os.PathLike[str]"]


def bearer_token(token: Optional[str], token_file: Optional[PathLike]) -> Optional[str]:
    """The token to send: ``token``, or the contents of ``token_file``.

    One trailing line ending (``\\n`` or ``\\r\\n``, as a file or ``$(cat ...)``
    leaves it) is stripped. A token that is then empty, or holds any other
    character than printable ASCII without spaces, raises ``ValueError`` saying
    where the bad character is, never what the token is. Giving both raises
    ``ValueError``; a file that cannot be read raises ``OSError`` naming the file.
    """
    if token is not None and token_file is not None:
        raise ValueError("keysmith: give token or token_file, not both")
    where = "token"
    if token_file is not None:
        where = f"the token in token_file={os.fspath(token_file)!r}"
        try:
            with open(token_file, encoding="utf-8", errors="strict") as f:
                token = f.read()
        except UnicodeDecodeError:
            raise ValueError(f"keysmith: {where} is not UTF-8 text; a token is printable ASCII") from None
        except OSError as e:
            raise type(e)(f"keysmith: cannot read token_file={os.fspath(token_file)!r}: {e.strerror}") from None
    if token is None:
        return None
    if not isinstance(token, str):
        raise TypeError(f"keysmith: token must be a str, got a {type(token).__name__}")
    if token.endswith("\r\n"):
        token = token[:-2]
    elif token.endswith("\n"):
        token = token[:-1]
    if not token:
        raise ValueError(f"keysmith: {where} is empty")
    for i, ch in enumerate(token):
        if not "\x21" <= ch <= "\x7e":
            what = "a space" if ch == " " else "a control character" if ch < " " or ch == "\x7f" else "a non-ASCII character"
            raise ValueError(
                f"keysmith: {where} has {what} at position {i} (of {len(token)}); a token is printable "
                "ASCII without spaces (check the file or variable it came from; the token is not shown)"
            )
    return token
