"""Connect's credentials file, read as Java reads it: ``java.util.Properties.load(InputStream)``
(what ``PropertyFileLoginModule`` calls) against ``emulator.server.auth.properties``.

A file that works for a Connect worker must mean the same users and passwords to the daemon, so
the tricky corners of the syntax (separators, escapes, continuations, comments, ISO-8859-1 bytes,
``\\uXXXX`` surrogates) are compared with Java's answer, never with our own reading.
"""

from __future__ import annotations

import random

import pytest

from emulator.server.auth.properties import PropertiesError, parse_properties
from tests.oracle import JavaError, JavaOracle

pytestmark = pytest.mark.jvm

TRICKY = (
    # separators: =, :, blanks, and blanks around them; the first unescaped one ends the key
    b"alice=secret\nbob:pw:with:colons\ncarol  spaced value  \ndave = = starts with equals\n"
    b"erin\t:\tsecond\nfrank\f=form feed\n"
    # comments and blank lines, with leading blanks, and after CRLF
    b"# a comment\n   ! also a comment\r\n\r\n   \n  grace=after comments\r\n"
    # escaped separators in keys, escapes in values
    b"key\\=with\\:seps\\ and\\ blanks=value\\tTab\\nNewline\\\\backslash\\q\n"
    # continuations: odd backslashes continue, even ones do not; the next line's blanks are dropped
    b"heidi=con\\\n     tinued\\\n\ttwice\neven=two\\\\\nodd=three\\\\\\\n  more\n"
    # \\uXXXX: BMP, a surrogate pair, a lone surrogate; Latin-1 bytes as they are
    b"ivan=\\u00e9t\\u00C9\nmallory=\\ud83d\\ude00\nlone=\\udc00x\nlatin=caf\xe9\n"
    # duplicates (the later wins), a key without value, an empty key, CR-only line ends
    b"dup=first\ndup=second\nnovalue\n=empty key\rcr=only\rlast=no newline at end\\"
)

EDGES = (
    b"",
    b"\\",
    b"# only a comment\\\nstill=comment? no: a comment line does not continue\n",
    b"a\\\n\nb=blank continuation ends the line",
    b"\\\n#after a lone backslash\nx=y",
    b"k=v\\\r\n  crlf continuation",
    b"trailing blanks   \t",
    b"  =  \n:\n",
)


def test_tricky_credentials_files_read_as_java_reads_them(java_oracle: JavaOracle) -> None:
    files = [TRICKY, *EDGES]
    for data, java in zip(files, java_oracle.properties_load(files), strict=True):
        assert not isinstance(java, JavaError), f"Java refused {data!r}: {java}"
        assert parse_properties(data) == java, data


def test_malformed_unicode_escapes_are_refused_as_java_refuses_them(java_oracle: JavaOracle) -> None:
    files = [b"user=\\u12", b"user=\\uZZZZ", b"\\u00g1=x"]
    for data, java in zip(files, java_oracle.properties_load(files), strict=True):
        assert isinstance(java, JavaError), data
        with pytest.raises(PropertiesError, match="malformed"):
            parse_properties(data)


def test_random_files_from_the_syntax_alphabet_match_java(java_oracle: JavaOracle) -> None:
    """Seeded-random files built from the characters the syntax gives meaning to."""
    rng = random.Random(20261123)
    alphabet = [b"a", b"b", b"=", b":", b" ", b"\t", b"\f", b"\\", b"\n", b"\r", b"#", b"!", b"\\u0041", b"\xff"]
    files = [b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(2000)]
    answers = java_oracle.properties_load(files)
    for data, java in zip(files, answers, strict=True):
        if isinstance(java, JavaError):
            with pytest.raises(PropertiesError):
                parse_properties(data)
        else:
            assert parse_properties(data) == java, data
