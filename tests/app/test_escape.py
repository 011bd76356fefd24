"""``md`` escapes what can open Markdown, and only that: a report's source reads like its text."""

from __future__ import annotations

import pytest

from stateglass.app.escape import md

# Text StateGlass writes itself, around checkpoint text: none of it can open markup.
PLAIN = [
    "2026-11-28 04:33:44 UTC",
    "watermark at 2024-01-01 00:48:38.5 UTC",
    "restarts: state version 12 loads in all 4 store partitions",
    "keys 76 -> 89 over versions 3..12",
    "0/default state_leak: timer expiry < watermark",
    "A & B",
    "join-hdfs",
]


@pytest.mark.parametrize("text", PLAIN)
def test_text_that_opens_no_markup_stays_as_it_is(text: str) -> None:
    assert md(text) == text


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("[x](https:evil)", "\\[x\\](https\\:evil)"),
        ("see https://evil.example", "see https\\://evil.example"),
        ("www.evil.example", "www\\.evil.example"),
        ("a@b.example", "a\\@b.example"),
        ("<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert(1)>"),
        ("</script>", "\\</script>"),
        ("<!-- x -->", "\\<!-- x -->"),
        ("&lt; &#60;", "\\&lt; \\&#60;"),
        (":red[x]", "\\:red\\[x\\]"),
        ("1:100:2 :+1:", "1\\:100\\:2 \\:+1:"),
        ("_em_ __init__ *b*", "\\_em\\_ \\_\\_init\\_\\_ \\*b\\*"),
        ("`code` ~~s~~ $x$ a|b", "\\`code\\` \\~\\~s\\~\\~ \\$x\\$ a\\|b"),
        ("# heading", "\\# heading"),
        ("> quote", "\\> quote"),
        ("1. item", "1\\. item"),
    ],
)
def test_what_can_open_markup_is_escaped(text: str, escaped: str) -> None:
    assert md(text) == escaped
