"""The design document the code cites exists and has every section cited; the site's pages link what exists,
name topics rather than issues, and keep every record folder named."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_design_reference_names_a_section_that_exists() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "design.md").read_text(), flags=re.M))
    cited = set()
    for folder in ("rcattr", "eval", "baselines", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            cited |= set(re.findall(r"docs/design\.md §(\d+)", path.read_text()))
    for path in (ROOT / "README.md", ROOT / "Makefile"):
        cited |= set(re.findall(r"docs/design\.md §(\d+)", path.read_text()))
    assert cited and cited <= sections
    assert not [path for path in (ROOT / "rcattr").rglob("*.py") if "DESIGN §" in path.read_text()]


def test_the_front_page_is_short_and_links_pages_that_exist() -> None:
    """Issue 76: the README is a front page (at most 250 lines); the guide, benchmarks and reference are docs/
    pages (mkdocs.yml's nav, built by ``make docs``), and every page the README links to exists."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    linked = re.findall(r"\]\(((?:docs/)?[\w/.-]+\.md)(?:#[\w-]+)?\)", readme)
    assert linked and all((ROOT / path).is_file() for path in linked)
    nav = set(re.findall(r": ([\w/.-]+\.md)$", (ROOT / "mkdocs.yml").read_text(), flags=re.M))
    pages = {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}
    assert nav == {page for page in pages if not page.startswith("records/")}


# ---- the benchmark pages: topics a reader navigates, no issue numbers, every record folder still named

DOCS = ROOT / "docs"
ISSUE_IN_HEADING = re.compile(r"\bissues?\s+#?\d+|#\d+\b", flags=re.I)
ISSUE_IN_TEXT = re.compile(r"\bissues?\s+#?\d+|(?<![\w/.#&-])#\d+\b", flags=re.I)

# Every docs/records path the single benchmarks page named before it became docs/benchmarks/ (its last version:
# `git show <commit>:docs/benchmarks.md | grep -o 'records/[A-Za-z0-9_./{},*-]*'`, the run folders' own
# `records/` left out). Each is still named, word for word, by a page of docs/benchmarks/.
OLD_PAGE_RECORD_PATHS = """
records/attribution/ records/attribution/faithfulness_lexical records/attribution/quotesum/config.json
records/attribution/quotesum/records/*.gz records/attribution/{quotesum,verigran}/
records/attribution_heads/ records/attribution_heads/gemma_quotesum records/attribution_heads/levers.md
records/attributionbench/*/results.md records/attributionbench/gemma_dev records/attributionbench/qwen_dev
records/attributionbench/qwen_dev160 records/attributionbench/smollm2_dev records/attributionbench/verdict/
records/attributionbench/{gemma_dev,qwen_dev} records/attributionbench/{smollm2_dev,gemma_dev,qwen_dev}
records/bench_attribution.json records/citations/gemma_quotesum_50 records/citations/smollm2
records/citations/smollm2_issue59 records/citations/smollm2_lexical_{quotesum80,verigran40}
records/citations/smollm2_verdict_* records/compress_once/ records/distill/*/results.md
records/groundedness_answers/ records/groundedness_answers_gemma/ records/groundedness_unsupported/
records/groundedness_unsupported_gemma/ records/kv/ records/kv/budget-needle/ records/kv/kv-needle-60
records/kv/kv-qmsum-20 records/kv/kv-squad-100 records/kv/kv-squad-extra-20 records/kv/needle-presses/
records/kv/needle-rc/ records/kv/{levers,budget,windows}-* records/kv_blend/ records/kv_default/
records/kv_default/*/ records/kv_default/qwen2-{squad,qmsum}-2048 records/kv_distilled
records/kv_distilled/{needle,squad,qmsum}-2048 records/kv_distilled_4k/needle-4096
records/kv_distilled_qwen2/needle-2048 records/kv_long_needle/results.md records/kv_long_qmsum/results.md
records/kv_once/ records/kv_once/*-2048-threshold records/kv_once_chunk/ records/lengths/{smollm2,gemma}/
records/long_context/cost/ records/long_context/cost/gemma_32k_once.json
records/long_context/cost/parts_smollm2_{2k,8k}.json records/long_context/gemma/ records/long_context/gpu/
records/long_context/smollm2/ records/long_context/smollm2/*_8k_middle/results.md
records/long_context/smollm2/*_short_hidden records/long_context/smollm2/quotesum/context_length.png
records/long_table records/long_table/levers.md records/long_table/qwen_verigran_diagnosis.md
records/long_table/scale.md records/long_table/smollm2_verigran_8k_held_out/ records/long_table/table.md
records/natural_errors/gemma records/natural_errors/smollm2
records/peers/at2-cpu/estimators/n8/score_estimator.pt records/peers/quotesum-cpu records/peers/verigran-gpu
records/reach/ records/reach/gemma_quotesum_length records/reach/gemma_verigran_length
records/serve/quotesum_cpu.json records/serve/squad_cpu.json records/serve/squad_cpu_400
""".split()


def _prose(path: Path) -> list[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    lines, fence = [], None
    for line in path.read_text().splitlines():
        marker = re.match(r"\s*(```|~~~)", line)
        if marker:
            fence = None if fence == marker.group(1) else (fence or marker.group(1))
            continue
        if fence is None:
            lines.append(line)
    return lines


def _site_pages() -> list[Path]:
    return [path for path in sorted(DOCS.rglob("*.md")) if "records" not in path.relative_to(DOCS).parts[:1]]


def _expand(pattern: str) -> list[str]:
    """A shell brace pattern's alternatives: `a/{b,c}-*` gives `a/b-*` and `a/c-*`."""
    brace = re.search(r"\{([^{}]*)\}", pattern)
    if not brace:
        return [pattern]
    return [
        out
        for alt in brace.group(1).split(",")
        for out in _expand(pattern[: brace.start()] + alt + pattern[brace.end() :])
    ]


def test_the_issue_patterns_catch_what_they_are_for() -> None:
    for heading in (
        "Long retrievals on every model (issue 74)",
        "Context reliance (issues 20 and 38)",
        "Levers (#49)",
    ):
        assert ISSUE_IN_HEADING.search(heading)
    for text in ("as issue 61 found", "issue 60's table", "Until issue 38", "since issue 72", "(see #62)"):
        assert ISSUE_IN_TEXT.search(text)
    for text in ("design.md#3-kv-cache-eviction", "the issue's targets", "[^3]", "smollm2_issue59"):
        assert not ISSUE_IN_TEXT.search(text)


def test_no_heading_under_docs_names_an_issue() -> None:
    """A reader of the site cannot open an issue: headings name the topic (records' own files included)."""
    named = [
        f"{path.relative_to(ROOT)}: {line}"
        for path in sorted(DOCS.rglob("*.md"))
        for line in _prose(path)
        if re.match(r"#{1,6}\s", line) and ISSUE_IN_HEADING.search(line.lstrip("#"))
    ]
    assert not named


def test_no_site_page_names_an_issue() -> None:
    """The site's pages (docs/ outside docs/records/) say which section or topic, never which issue."""
    named = [
        f"{path.relative_to(ROOT)}: {line.strip()[:120]}"
        for path in _site_pages()
        for line in _prose(path)
        if ISSUE_IN_TEXT.search(line)
    ]
    assert not named


def test_the_benchmarks_are_pages_of_one_folder_and_its_index_links_every_one() -> None:
    folder = DOCS / "benchmarks"
    assert not (DOCS / "benchmarks.md").exists()
    index = (folder / "index.md").read_text()
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]+)?\)", index))
    assert linked == {path.name for path in folder.glob("*.md")} - {"index.md"}


def test_every_record_path_of_the_old_benchmarks_page_is_still_named_and_exists() -> None:
    text = "\n".join(path.read_text() for path in sorted((DOCS / "benchmarks").glob("*.md")))
    assert not [path for path in OLD_PAGE_RECORD_PATHS if path not in text]
    missing = [
        path
        for path in OLD_PAGE_RECORD_PATHS
        if not any(list(DOCS.glob(alt)) or list(DOCS.glob(alt + ".*")) for alt in _expand(path.rstrip("/")))
    ]
    assert not missing


def test_every_record_folder_is_named_by_a_site_page() -> None:
    """Every folder of docs/records/ is named by a page of the site; so is every folder inside one that holds a
    Markdown report: by its path (braces and wildcards expanded), by its name on a page that names its parent,
    or by its parent's README.md. A parent named only as a whole (no page names any of its folders, as
    `kv_once_chunk/`) stands for its folders."""
    pages = {path: path.read_text() for path in _site_pages()}
    everything = "\n".join(pages.values())
    tops = sorted(path for path in (DOCS / "records").iterdir() if path.is_dir())
    assert tops
    assert not [top.name for top in tops if f"records/{top.name}" not in everything]

    named: set[Path] = set()
    for pattern in re.findall(r"records/[\w.{},*/-]+", everything):
        for alt in _expand(pattern.rstrip(".,/")):
            named.update(path.resolve() for path in DOCS.glob(alt))

    def is_named(folder: Path) -> bool:
        parent, word = folder.parent, re.compile(rf"(?<![\w-]){re.escape(folder.name)}(?![\w-])")
        readme = parent / "README.md"
        return (
            any(path == folder.resolve() or folder.resolve() in path.parents for path in named)
            or any(f"records/{parent.name}" in text and word.search(text) for text in pages.values())
            or (readme.is_file() and bool(word.search(readme.read_text())))
        )

    unnamed = []
    for top in tops:
        folders = sorted(path for path in top.iterdir() if path.is_dir() and any(path.rglob("*.md")))
        if folders and not any(is_named(folder) for folder in folders):
            continue  # the parent is named as a whole
        unnamed += [str(folder.relative_to(DOCS)) for folder in folders if not is_named(folder)]
    assert not unnamed


def _anchors(path: Path) -> set[str]:
    """The anchors mkdocs gives a page's headings (Python-Markdown's toc slugs, duplicates numbered)."""
    anchors: set[str] = set()
    for line in _prose(path):
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = unicodedata.normalize("NFKD", heading.group(1)).encode("ascii", "ignore").decode()
            slug = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())
            anchor, n = slug, 0
            while anchor in anchors:
                n += 1
                anchor = f"{slug}_{n}"
            anchors.add(anchor)
    return anchors


def test_every_link_to_a_section_finds_its_heading() -> None:
    """`make docs` builds quietly, which hides mkdocs' anchor warnings: a renamed heading must take its links along."""
    broken = []
    for page in [*_site_pages(), ROOT / "README.md"]:
        for target, anchor in re.findall(r"\]\(([^)\s#]*)#([\w.-]+)\)", page.read_text()):
            path = (page.parent / target).resolve() if target else page
            if (target and not target.endswith(".md")) or (DOCS / "api") in path.parents:
                continue  # another kind of file, or mkdocstrings' own anchors
            if not path.is_file() or anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken
