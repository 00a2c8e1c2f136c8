"""The documentation holds: its links resolve, the commands it shows exist and parse, every
benchmark and marker set is documented, and the README's Python example runs and prints what the
README says.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from helpers.shared import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
WORD = re.compile(r"[a-z][a-z0-9_-]*")


# ------------------------------------------------------------------------------------ reading
def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the ```language fenced blocks of a markdown text, in order."""
    return [body for lang, body in FENCE.findall(text) if lang == language]


def prose(text: str) -> str:
    """The text without its fenced blocks and inline code (links there are examples)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (outside fenced blocks)."""
    lines = FENCE.sub("", page.read_text(encoding="utf-8")).splitlines()
    return {slug(line.lstrip("#")) for line in lines if re.match(r"#{1,6} ", line)}


def relative_links(page: Path) -> list[str]:
    """Targets of a page's links and images that are not web addresses."""
    targets = LINK.findall(prose(page.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z]+:", t)]


def commands(page: Path) -> list[tuple[str, ...]]:
    """Each ``rbmcap`` command line of a page's bash blocks: the words after ``rbmcap``
    (at most two: a command and its action), comments left out."""
    found = []
    for block in fenced_blocks(page.read_text(encoding="utf-8"), "bash"):
        for line in block.splitlines():
            tokens = line.split("#", 1)[0].split()
            for i, token in enumerate(tokens):
                if token == "rbmcap" or token.endswith("bin/rbmcap"):
                    words = [t for t in tokens[i + 1 : i + 3] if WORD.fullmatch(t)]
                    found.append(tuple(words[:2]))
    return found


def command_lines(page: Path) -> list[list[str]]:
    """The arguments after ``rbmcap`` of each command in a page's bash blocks, ready for the
    parser: continuation lines joined, comments dropped, optional ``[...]`` parts left out and
    ``<placeholders>`` filled in. Lines with a ``NAME`` or ``|`` alternatives are left out."""
    found = []
    for block in fenced_blocks(page.read_text(encoding="utf-8"), "bash"):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"<[^>]*>", "x", re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]))
            tokens = shlex.split(line)
            starts = [i for i, t in enumerate(tokens) if t == "rbmcap" or t.endswith("bin/rbmcap")]
            if starts and "NAME" not in tokens and "|" not in tokens:
                rest = tokens[starts[0] + 1 :]
                stop = [i for i, t in enumerate(rest) if t in ("&&", ";", "||")]
                found.append(rest[: stop[0]] if stop else rest)
    return found


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's sub-command parsers by name (empty when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# ------------------------------------------------------------------------------------ tests
def test_the_docs_exist_and_the_readme_links_every_page():
    linked = {(README.parent / t.split("#")[0]).resolve() for t in relative_links(README)}
    assert len(PAGES) > 5
    missing = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_every_command_in_a_bash_block_exists():
    from rbmcap.bench import BENCHMARKS
    from rbmcap.cli.main import build_parser

    top = subcommands(build_parser())
    unknown = []
    for page in PAGES:
        for words in commands(page):
            if not words or words[0] not in top:
                unknown.append(f"{page.name}: rbmcap {' '.join(words)}")
                continue
            actions = subcommands(top[words[0]])
            second = words[1] if len(words) > 1 else None
            if words[0] == "bench" and second and second not in BENCHMARKS:
                unknown.append(f"{page.name}: rbmcap bench {second}")
            elif actions and second and second not in actions:
                unknown.append(f"{page.name}: rbmcap {words[0]} {second}")
    assert not unknown, "commands the CLI does not have: " + ", ".join(unknown)
    assert len({w[0] for p in PAGES for w in commands(p) if w}) >= 10


def test_every_command_line_parses():
    from rbmcap.cli.main import build_parser

    parser = build_parser()
    lines = [(page.name, args) for page in PAGES for args in command_lines(page)]
    failed = []
    for name, args in lines:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser.parse_args(args)
        except SystemExit:
            why = err.getvalue().strip().splitlines()[-1]
            failed.append(f"{name}: rbmcap {' '.join(args)}: {why}")
    assert not failed, "command lines the CLI rejects:\n" + "\n".join(failed)
    assert len(lines) > 40


def test_every_benchmark_is_documented_with_its_command():
    from rbmcap.bench import BENCHMARKS

    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    missing = [name for name in BENCHMARKS if f"rbmcap bench {name} --json" not in text]
    assert not missing, f"benchmarks.md lacks: {missing}"


def test_every_marker_set_has_its_picture():
    from rbmcap.markers import available_marker_sets

    text = (DOCS / "markers.md").read_text(encoding="utf-8")
    for name in available_marker_sets():
        assert f"(images/markers_{name}.png)" in text, f"markers.md shows no picture of {name}"
        assert (DOCS / "images" / f"markers_{name}.png").is_file()


def test_the_readme_python_example_prints_what_the_readme_says(tmp_path, monkeypatch):
    text = README.read_text(encoding="utf-8")
    example = fenced_blocks(text, "python")[0]
    assert len(example.strip().splitlines()) <= 12, "the README example should stay short"
    claimed = re.search(r"It prints `MPJPE ([\d.]+) mm`", text)
    assert claimed, "the README should say what its example prints"
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    printed = re.fullmatch(r"MPJPE ([\d.]+) mm\n", out.getvalue())
    assert printed, f"unexpected output: {out.getvalue()!r}"
    assert float(printed.group(1)) == pytest.approx(float(claimed.group(1)), abs=0.2)
