"""Text from a checkpoint, made plain for every place the app shows it.

A checkpoint's directory name, its keys and values, field names, query ids, operator and
state variable names, and the error messages that quote them are written by whoever controls
the checkpoint. Each output that interprets markup gets one function here, and every page and
report goes through them rather than escaping on its own:

- ``md``: Markdown (Streamlit's ``st.markdown``, captions, labels, alerts; the ``.md`` report).
  Each character that can open inline markup is backslash-escaped (CommonMark renders an
  escaped punctuation character as itself): no link, image, emphasis, code, raw HTML, entity,
  table pipe, LaTeX (``$``), autolink (``http:``, ``@``, ``www.``), emoji shortcode
  (``:100:``) or Streamlit directive (``:red[…]``) can start inside the text. Line breaks
  become spaces and a leading block marker (``#``, ``-``, ``1.``…) is escaped, so a name
  cannot open a heading or a list. What cannot open markup stays as it is, so the source of
  a ``.md`` report reads like its text: ``join-hdfs``, ``state_leak`` (an underscore inside a
  word never emphasises), ``76 -> 89``, ``batch 11: 04:33:44`` (a colon opens an autolink,
  shortcode or directive only right before a word or ``/``; a clock time's two digits are
  none of those).
- ``md_code``: the same text as an inline code span (literal in CommonMark), for ids and paths.
- ``html_text``: HTML text and attribute values.
- ``plot_text``: Plotly titles, legend names and hover templates, which render a subset of HTML
  (``<a href>``, ``<b>``…) and substitute ``%{…}``.

Example::

    st.markdown(f"**{md(checkpoint)}**")          # a directory named [x](https:evil) stays text
    fig.add_bar(name=plot_text(source), ...)
"""

from __future__ import annotations

import html
import re

# Characters that can open inline markup in CommonMark, GFM or Streamlit's Markdown, where
# they can: "<" before what opens a tag, comment or autolink; "&" before an entity's name or
# "#"; "_" not inside a word; ":" before a word character, "/", "+" or "-" ("https://",
# ":red[", ":+1:") unless it is a clock's ("04:33:44": no shortcode or directive is two
# digits). ">" closes raw HTML but opens only a block quote, which _MD_BLOCK_START handles.
_MD_INLINE = re.compile(
    r"([\\`*\[\]|~$@]"
    r"|<(?![\s\d=])|&(?=[#\w])"
    r"|(?<![^\W_])_|_(?![^\W_])"
    r"|(?<!\d):(?=[\w/+-])|:(?=[\w/+-])(?!\d\d(?!\w)))"
)
# Block markers count only at the start of a line (and our text is one line).
_MD_BLOCK_START = re.compile(r"^(\s*)([-+#>=]|\d+(?=[.)]))")
# GFM links a bare "www.example.com"; an escaped dot breaks the match.
_MD_WWW = re.compile(r"(?i)\b(www)\.")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c]+")


def _one_line(value: object) -> str:
    return _LINE_BREAKS.sub(" ", "" if value is None else str(value))


def md(value: object) -> str:
    """``value`` as Markdown that renders as exactly its text, on one line."""
    text = _MD_INLINE.sub(r"\\\1", _one_line(value))
    text = _MD_WWW.sub(r"\1\\.", text)
    return _MD_BLOCK_START.sub(lambda m: m.group(1) + _escape_block(m.group(2)), text)


def _escape_block(marker: str) -> str:
    # "1." is escaped on its dot ("1\."); a symbol marker on itself.
    return marker + "\\" if marker[0].isdigit() else "\\" + marker


def md_code(value: object) -> str:
    """``value`` as an inline code span: a fence longer than any run of backticks inside."""
    text = _one_line(value)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    # A space apart from the fence when the text itself starts or ends with a backtick.
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html_text(value: object) -> str:
    """``value`` as HTML text or a quoted attribute value."""
    return html.escape("" if value is None else str(value), quote=True)


def plot_text(value: object) -> str:
    """``value`` for a Plotly title, trace name or hover template.

    Plotly turns entities back into characters after it fills ``%{…}`` placeholders, so an
    escaped brace shows as a brace without naming a placeholder.
    """
    return html_text(_one_line(value)).replace("{", "&#123;").replace("}", "&#125;")
