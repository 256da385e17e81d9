"""The package layout (issue 40): the top of ``src/toolwire/`` holds only the spine and
the ground, Prefect is imported only at the edge (``flows/``), and no import runs upward.

Every import counts, at module top or inside a function, under ``TYPE_CHECKING`` too:
a layer that names an upper one only for its types still cannot be read without it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "toolwire"

# The spine (one run, the job table) and the ground every package may import.
TOP_LEVEL = {
    "__init__.py",
    "__main__.py",
    "lifecycle.py",
    "jobs.py",
    "errors.py",
    "domain.py",
    "embedder.py",
    "gbnf.py",
    "stop_reasons.py",
    "arguments.py",
    "prefect_settings.py",
}

# Packages below the jobs: they may not import a job, the spine or the Prefect edge.
LOWER = ("protocols", "providers", "store", "files", "spec", "run")
UPPER = ("toolwire.librarian", "toolwire.agent", "toolwire.jobs", "toolwire.lifecycle")
UPPER += ("toolwire.flows",)

# Where Prefect may be imported: the edge, and the cron check's fallback (it loads
# Prefect's vendored croniter when its fast path cannot decide).
PREFECT_ALLOWED = ("flows/", "run/preflight.py")

# The librarian's wings: each builds only on the ones named.
WINGS = {
    "librarian/notes/": (),
    "librarian/judge/": ("toolwire.librarian.notes",),
    "librarian/journal/": ("toolwire.librarian.notes",),
}


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def all_imports(root: Path) -> dict[str, set[str]]:
    return {p.relative_to(root).as_posix(): imports_of(p) for p in sorted(root.rglob("*.py"))}


def layout_problems(root: Path) -> list[str]:
    """One line per file and rule broken, naming the first import that breaks it."""
    top = {p.name for p in root.glob("*.py")}
    problems = [f"{name}: not the spine or the ground; move it into a package"
                for name in sorted(top - TOP_LEVEL)]  # fmt: skip
    for rel, modules in all_imports(root).items():
        package = rel.split("/")[0]
        broken: dict[str, str] = {}
        for module in sorted(modules):
            if _under(module, "prefect") and not rel.startswith(PREFECT_ALLOWED):
                broken.setdefault("prefect", f"{module} (Prefect belongs under flows/)")
            if package in LOWER and any(_under(module, up) for up in UPPER):
                broken.setdefault("upward", f"{module} ({package}/ is below the jobs)")
            for wing, allowed in WINGS.items():
                if not rel.startswith(wing) or not _under(module, "toolwire.librarian"):
                    continue
                own = "toolwire." + wing.rstrip("/").replace("/", ".")
                if not _under(module, own) and not any(_under(module, a) for a in allowed):
                    broken.setdefault("wing", f"{module} ({wing} builds on {allowed})")
        problems += [f"{rel}: imports {why}" for why in broken.values()]
    return problems


def test_the_tree_keeps_its_layout() -> None:
    assert layout_problems(SRC) == []


def test_the_top_level_holds_at_most_ten_modules() -> None:
    modules = {p.name for p in SRC.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert len(modules) <= 10, sorted(modules)


def test_the_check_sees_each_kind_of_breach(tmp_path: Path) -> None:
    # A check that matches nothing has checked nothing: plant one breach of each rule.
    for rel, text in {
        "extra.py": "",
        "store/rows.py": "from toolwire.librarian.report import x\n",
        "run/start.py": "def f():\n    import toolwire.flows\n",
        "providers/base.py": "from prefect import task\n",
        "run/preflight.py": "def f():\n    from prefect._vendor import croniter\n",
        "librarian/notes/tags.py": "from toolwire.librarian.judge.fit import softmax\n",
        "librarian/judge/fit.py": "from toolwire.librarian.notes.tags import x\n",
        "librarian/journal/disk.py": "from toolwire.librarian.review import y\n",
    }.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    problems = layout_problems(tmp_path)
    assert problems == [
        "extra.py: not the spine or the ground; move it into a package",
        "librarian/journal/disk.py: imports toolwire.librarian.review "
        "(librarian/journal/ builds on ('toolwire.librarian.notes',))",
        "librarian/notes/tags.py: imports toolwire.librarian.judge.fit "
        "(librarian/notes/ builds on ())",
        "providers/base.py: imports prefect (Prefect belongs under flows/)",
        "run/start.py: imports toolwire.flows (run/ is below the jobs)",
        "store/rows.py: imports toolwire.librarian.report (store/ is below the jobs)",
    ]


def test_no_module_passes_500_lines() -> None:
    # Past ~500 lines the seam found is a package boundary (STYLE.md): split it there.
    long = {rel: n for rel, n in module_lengths(SRC).items() if n > 500}
    assert long == {}


def module_lengths(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(root.rglob("*.py"))
    }
