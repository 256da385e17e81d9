"""How the corpora in this folder were cut from their public sources (run once; kept
so the copies can be checked and rebuilt). Each corpus is ``<corpus>/<label>/<note>.md``:
the folder is the label, and the benchmark (``bench/vault_accuracy.py``) strips it.

- ``til-dev`` / ``til-heldout``: jbranchaud/til (MIT), one person's short programming
  notes filed in topic folders; 18 topics, up to 24 notes each, picked by a hash of
  the file name and dealt alternately into the two halves (``til-heldout`` is never
  read while tuning).
- ``hf-course``: huggingface/course (Apache-2.0), the English chapters 1-12, one note
  per section, labelled by chapter (held out: never read while tuning). The banner
  that names the chapter number is removed, so nothing but the text gives the label.

- ``traefik-docs``: traefik/traefik (MIT), the documentation under ``docs/content``: a
  project's documentation, labelled by the folder it is filed in (folders that hold one
  subject mapped to one topic, ``TRAEFIK_TOPICS``; pages of other folders left out),
  up to 15 pages per topic picked by a hash of the path (held out: never read while
  tuning). Pages are copied verbatim.
- ``rbe``: rust-lang/rust-by-example (MIT or Apache-2.0), a course's pages filed by
  chapter: the pages under ``src/<chapter>/`` (nested sections too, each page under
  its own file name; the chapter's own intro page, named after the chapter, is left
  out), up to 15 per chapter picked by a hash of the path. Added after the apply rule
  of issue 28 was settled: read by nothing but the one measurement. Copied verbatim.

- ``hugo-docs``: gohugoio/hugoDocs (Apache-2.0, ``content/LICENSE.md``), the English
  documentation under ``content/en/<section>/``: a project's documentation labelled by
  its section (``HUGO_TOPICS``, the sections with at least eight pages, minus the
  glossary), up to 15 pages per section picked by a hash of the path, the section's own
  ``_index.md`` left out. The ``aliases:`` front matter line (old URLs naming the
  section) is removed; nothing else is edited. Added in issue 41 and never tuned on.

Usage: ``python -m bench.corpora.trim_sources <til git dir> <course git dir>
<traefik git dir> [<rust-by-example git dir> [<hugoDocs git dir>]]``.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIL_TOPICS = (
    "rails unix postgres ruby vim git javascript python react elixir mac workflow tmux "
    "reason go css typescript clojure"
).split()
TIL_PER_TOPIC = 24
# Chapter -> label: the chapter's title in the course's table of contents, as a topic name.
COURSE_TOPICS = {
    1: "transformer-models",
    2: "using-transformers",
    3: "fine-tuning",
    4: "sharing-models",
    5: "datasets-library",
    6: "tokenizers-library",
    7: "nlp-tasks",
    8: "asking-for-help",
    9: "gradio-demos",
    10: "dataset-curation",
    11: "llm-fine-tuning",
    12: "reasoning-models",
}


# Topic -> the docs folders filed under it (first match wins), from the folder names only.
TRAEFIK_TOPICS = {
    "kubernetes": (
        "reference/routing-configuration/kubernetes/",
        "reference/install-configuration/providers/kubernetes/",
        "expose/kubernetes/",
    ),
    "middlewares": (
        "reference/routing-configuration/http/middlewares/",
        "reference/routing-configuration/tcp/middlewares/",
    ),
    "providers": (
        "reference/install-configuration/providers/",
        "reference/routing-configuration/other-providers/",
    ),
    "tls": (
        "reference/install-configuration/tls/",
        "reference/routing-configuration/http/tls/",
        "https/",
    ),
    "observability": ("reference/install-configuration/observability/", "observe/"),
    "routing": (
        "reference/routing-configuration/http/routing/",
        "reference/routing-configuration/http/load-balancing/",
        "reference/routing-configuration/tcp/routing/",
        "reference/routing-configuration/udp/routing/",
    ),
    "contributing": ("contributing/",),
    "migration": ("migrate/",),
    "security": ("security/", "secure/"),
}
TRAEFIK_PER_TOPIC = 15
# Rust by Example chapters (its src/ folders with at least six pages) used as topics.
RBE_TOPICS = (
    "hello custom_types flow_control fn mod generics scope trait macros error std std_misc"
).split()
RBE_PER_TOPIC = 15
# hugoDocs sections (content/en/<section>/, at least eight pages; quick-reference is a
# glossary of every other section, left out) used as topics.
HUGO_TOPICS = (
    "commands configuration content-management functions methods templates "
    "host-and-deploy hugo-pipes render-hooks shortcodes"
).split()
HUGO_PER_TOPIC = 15


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def trim_til(repo: Path) -> None:
    for topic in TIL_TOPICS:
        names = _git(repo, "ls-tree", "--name-only", "HEAD", f"{topic}/").split()
        names = sorted(names, key=lambda n: hashlib.sha1(n.encode()).hexdigest())
        for i, name in enumerate(names[:TIL_PER_TOPIC]):
            half = "til-dev" if i % 2 == 0 else "til-heldout"
            out = HERE / half / topic / Path(name).name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(_git(repo, "show", f"HEAD:{name}"), encoding="utf-8")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "untitled"


def trim_course(repo: Path) -> None:
    for chapter, topic in COURSE_TOPICS.items():
        folder = f"chapters/en/chapter{chapter}/"
        for name in _git(repo, "ls-tree", "--name-only", "HEAD", folder).split():
            text = _git(repo, "show", f"HEAD:{name}")
            # The banner names the chapter (and its notebooks' URLs): a label giveaway.
            text = re.sub(r"<CourseFloatingBanner.*?/>\n?", "", text, flags=re.S)
            text = re.sub(r"\[\[[^\]]*\]\]", "", text)  # doc-builder heading anchors
            h1 = re.search(r"^# (.+)$", text, flags=re.M)
            stem = _slug(h1.group(1) if h1 else Path(name).stem)
            out = HERE / "hf-course" / topic / f"{stem}.md"
            n = 2
            while out.exists():
                out = out.with_name(f"{stem}-{n}.md")
                n += 1
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")


def _traefik_topic(page: str) -> str | None:
    return next((t for t, folders in TRAEFIK_TOPICS.items() if page.startswith(folders)), None)


def trim_traefik(repo: Path) -> None:
    root = "docs/content/"
    pages = [
        p[len(root) :]
        for p in _git(repo, "ls-tree", "-r", "--name-only", "HEAD", root).split()
        if p.endswith(".md")
    ]
    for topic in TRAEFIK_TOPICS:
        mine = [p for p in pages if _traefik_topic(p) == topic]
        mine = sorted(mine, key=lambda p: hashlib.sha1(p.encode()).hexdigest())
        for page in mine[:TRAEFIK_PER_TOPIC]:
            stem = _slug(page.removesuffix(".md").replace("/", "-"))
            out = HERE / "traefik-docs" / topic / f"{stem}.md"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(_git(repo, "show", f"HEAD:{root}{page}"), encoding="utf-8")


def trim_rbe(repo: Path) -> None:
    for topic in RBE_TOPICS:
        names = _git(repo, "ls-tree", "-r", "--name-only", "HEAD", f"src/{topic}/").split()
        names = sorted(
            (n for n in names if n.endswith(".md")),
            key=lambda n: hashlib.sha1(n.encode()).hexdigest(),
        )
        for name in names[:RBE_PER_TOPIC]:
            out = HERE / "rbe" / topic / Path(name).name
            n = 2
            while out.exists():
                out, n = out.with_name(f"{Path(name).stem}-{n}.md"), n + 1
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(_git(repo, "show", f"HEAD:{name}"), encoding="utf-8")


def trim_hugo(repo: Path) -> None:
    for topic in HUGO_TOPICS:
        names = _git(repo, "ls-tree", "-r", "--name-only", "HEAD", f"content/en/{topic}/")
        pages = sorted(
            (n for n in names.split() if n.endswith(".md") and not n.endswith("_index.md")),
            key=lambda n: hashlib.sha1(n.encode()).hexdigest(),
        )
        for name in pages[:HUGO_PER_TOPIC]:
            text = _git(repo, "show", f"HEAD:{name}")
            # Old URLs name the section (aliases: [/functions/...]): a label giveaway.
            text = re.sub(r"^aliases:.*\n(?:^  - .*\n)*", "", text, flags=re.M)
            rel = name.removeprefix(f"content/en/{topic}/").removesuffix(".md")
            stem = _slug(rel.removesuffix("/index").replace("/", "-"))
            out = HERE / "hugo-docs" / topic / f"{stem}.md"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    trim_til(Path(sys.argv[1]))
    trim_course(Path(sys.argv[2]))
    trim_traefik(Path(sys.argv[3]))
    if len(sys.argv) > 4:
        trim_rbe(Path(sys.argv[4]))
    if len(sys.argv) > 5:
        trim_hugo(Path(sys.argv[5]))
