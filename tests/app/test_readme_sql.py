"""The README's "Ask the state in SQL" shows real output: each `$ stateglass sql …` example
prints, today, exactly what the README says it prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from stateglass.app.cli import main
from tests.conftest import ROOT


def sql_section() -> str:
    """The README's "Ask the state in SQL" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Ask the state in SQL", 1)[1].split("\n## ", 1)[0]


def notebook_example() -> tuple[str, str]:
    """(code, output) of the section's notebook example: its Python block, and the block
    right under it showing what that prints."""
    code, after = sql_section().split("```python\n", 1)[1].split("```\n", 1)
    shown = re.match(r"\s*```\n(.*?)^```$", after, re.M | re.S)
    assert shown is not None, "the notebook example shows no output right under it"
    return code, shown.group(1)


def _examples() -> list[tuple[str, str]]:
    """(command, output) of each shell example in the section."""
    section = sql_section()
    found = []
    for lang, block in re.findall(r"^```(\w*)\n(.*?)^```$", section, re.M | re.S):
        if lang or not block.startswith("$ stateglass sql"):
            continue
        lines = block.splitlines()
        command = lines.pop(0)[2:]
        while _open_quote(command):
            command += "\n" + lines.pop(0)
        found.append((command, "".join(line + "\n" for line in lines)))
    return found


def _open_quote(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return True
    return False


EXAMPLES = _examples()


def test_the_section_has_its_examples() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize(
    ("command", "output"), EXAMPLES, ids=[str(i) for i in range(len(EXAMPLES))]
)
def test_an_example_prints_what_the_readme_shows(
    command: str,
    output: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HOME", str(tmp_path))  # no history database of the machine's
    argv = shlex.split(command)
    assert argv[:2] == ["stateglass", "sql"]
    assert main(argv[1:]) == 0
    assert capsys.readouterr().out == output
