"""The agent task suite: small file tasks on every transport with a real model (issue 32).

``python -m bench.agent_tasks [--transports xct,execute] [--tasks write_hello,...]
[--server] [--max-tokens 160] [--max-iterations 4] [--out FILE.json]``

Each task is a tiny workspace, a goal, and a verdict read from the workspace
(and the final report) after the run: a run counts as finished-and-verified
only when it ended ``ok`` (the spec's checks passed) *and* the verdict holds.
Every task's spec declares checks (a file's content, or a regex on the answer;
issue 46), so no run ends ``ok`` on the model's word alone; the summary counts
the runs that ended ``ok`` with the task undone, which must stay 0. Every task
gets the same four built-in tools; nothing in the engine knows the tasks.
The model is the bundled SmolLM2-135M, in process (``llamacpp:``), or with
``--server`` through llama-cpp-python's OpenAI-compatible server on
127.0.0.1 (the local test tier's helper starts it). Prints one line per run,
then per transport the success rate and the turns, model calls and tokens
spent; ``--out`` writes the rows as JSON. Runs are bounded by
``max_iterations`` (and the loop guard), never by wall time: the CPU may be
shared, so timings are reported, not judged.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRANSPORTS = ("native", "xml", "xml-final", "execute", "xct")

Verdict = Callable[[Path, str], bool]  # (workspace, final report text) -> done?


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # write | list | read | search | two-step (what the task needs)
    calls: int  # the fewest tool calls that do it
    goal: str
    files: dict[str, str]
    verdict: Verdict
    checks: tuple[dict[str, str], ...]


def _text(root: Path, rel: str) -> str:
    path = root / rel
    return path.read_text("utf-8", errors="replace") if path.is_file() else ""


TASKS: tuple[Task, ...] = (
    Task(
        "write_hello",
        "write",
        1,
        "Create the file hello.txt containing the text: hello world",
        {"readme.md": "# Scratch folder\n"},
        lambda root, _: "hello world" in _text(root, "hello.txt").lower(),
        ({"file": "hello.txt", "contains": "hello world"},),
    ),
    Task(
        "write_colour",
        "write",
        1,
        "Write the word blue into a new file named colour.txt.",
        {"readme.md": "# Scratch folder\n"},
        lambda root, _: "blue" in _text(root, "colour.txt").lower(),
        ({"file": "colour.txt", "contains": "blue"},),
    ),
    Task(
        "list_docs",
        "list",
        2,
        "List the files in the folder docs, then write their paths, one per line, into files.txt.",
        {"docs/intro.md": "# Intro\n", "docs/setup.md": "# Setup\n", "docs/faq.md": "# FAQ\n"},
        lambda root, _: all(
            p in _text(root, "files.txt") for p in ("docs/intro.md", "docs/setup.md", "docs/faq.md")
        ),
        ({"file": "files.txt", "lists": "docs/*.md"},),
    ),
    Task(
        "read_version",
        "read",
        1,
        "Read the file version.txt and say in your final report which version it names.",
        {"version.txt": "toolwire version 4.2.7\n", "notes.md": "# Notes\n"},
        lambda _, final: "4.2.7" in final,
        ({"answer_matches": r"4\.2\.7"},),
    ),
    Task(
        "copy_secret",
        "two-step",
        2,
        "Read the file secret.txt, then write exactly what it says into copy.txt.",
        {"secret.txt": "The code word is PELICAN.\n"},
        lambda root, _: "PELICAN" in _text(root, "copy.txt"),
        ({"file": "copy.txt", "contains": "PELICAN"},),
    ),
    Task(
        "search_banana",
        "search",
        2,
        "Search the notes folder for the word banana, then write the path of the file "
        "that mentions it into found.txt.",
        {
            "notes/fruit.md": "# Fruit\n\nI had a banana for lunch.\n",
            "notes/cars.md": "# Cars\n\nThe red car is fast.\n",
            "notes/work.md": "# Work\n\nMeeting at ten.\n",
        },
        lambda root, _: "notes/fruit.md" in _text(root, "found.txt"),
        ({"file": "found.txt", "contains": "notes/fruit.md"},),
    ),
    Task(
        "count_photos",
        "list",
        1,
        "How many files are in the folder photos? Give the number in your final report.",
        {"photos/a.jpg": "x", "photos/b.jpg": "x", "photos/c.jpg": "x", "todo.md": "# Todo\n"},
        lambda _, final: re.search(r"\b(3|three)\b", final, re.IGNORECASE) is not None,
        ({"answer_matches": r"(?i)\b(3|three)\b"},),
    ),
    Task(
        "first_line",
        "two-step",
        2,
        "Read todo.txt and write its first line into first.txt.",
        {"todo.txt": "buy milk\nwalk the dog\ncall mum\n"},
        lambda root, _: "buy milk" in _text(root, "first.txt"),
        ({"file": "first.txt", "contains": "buy milk"},),
    ),
    Task(
        "combine_two",
        "two-step",
        3,
        "Read a.txt and b.txt, then write both of their lines into both.txt.",
        {"a.txt": "red apples\n", "b.txt": "green pears\n"},
        lambda root, _: all(w in _text(root, "both.txt") for w in ("red apples", "green pears")),
        (
            {"file": "both.txt", "contains": "red apples"},
            {"file": "both.txt", "contains": "green pears"},
        ),
    ),
    Task(
        "find_owner",
        "search",
        1,
        "Which file under team mentions Priya? Give its path in your final report.",
        {
            "team/alice.md": "# Alice\n\nOwns the billing service.\n",
            "team/bob.md": "# Bob\n\nWorks with Priya on search.\n",
        },
        # The right file, and only it: a report that lists both files does not answer.
        lambda _, final: "bob.md" in final and "alice.md" not in final,
        ({"answer_matches": r"(?s)^(?!.*alice\.md).*bob\.md"},),
    ),
)

TOOLS = """\
tools:
  - name: list_dir
    description: List the files under a folder of the workspace.
    implementation: builtin:list_dir
  - name: read_file
    description: Read one text file of the workspace.
    implementation: builtin:read_file
  - name: write_file
    description: Create or replace one text file of the workspace.
    implementation: builtin:write_file
  - name: search_text
    description: Find the lines that contain a text, in the files under a folder.
    implementation: builtin:search_text
"""


def _spec(folder: Path, task: Task, transport: str, model: dict[str, Any], args: Any) -> Path:
    checks = "".join(f"  - {json.dumps(c)}\n" for c in task.checks)
    model_block = json.dumps(
        {**model, "temperature": args.temperature, "max_tokens": args.max_tokens}
    )
    spec = folder / "spec.yaml"
    spec.write_text(
        f"""name: task-{task.name.replace("_", "-")}
version: "1"
transport: {transport}
model: {model_block}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: {json.dumps(task.goal)}
{TOOLS}constraints:
  max_iterations: {args.max_iterations}
  max_tool_calls_per_turn: {args.max_calls_per_turn}
  max_repair_retries: 2
  context_window_tokens: 4096
final_report:
  format: text
"""
        + (f"checks:\n{checks}" if checks else ""),
        encoding="utf-8",
    )
    return spec


@dataclass
class Row:
    transport: str
    task: str
    kind: str
    ok: bool  # finished and verified: ended ok and the verdict holds
    status: str  # ok | unchecked | Failed
    error_code: str | None
    turns: int
    calls: int  # model calls
    input_tokens: int
    output_tokens: int
    seconds: float
    cpu_seconds: float
    final: str
    undone_ok: bool = False  # ended ok with the task not done (must never happen)


def run_task(task: Task, transport: str, model: dict[str, Any], args: Any, base: Path) -> Row:
    from toolwire.agent import prepare_agent_run, run_agent
    from toolwire.agent.quotes import quoted_text

    folder = Path(tempfile.mkdtemp(prefix=f"{task.name}-{transport}-", dir=base))
    root = folder / "ws"
    for rel, text in task.files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    spec = _spec(folder, task, transport, model, args)
    started, cpu = time.perf_counter(), time.process_time()
    ctx = prepare_agent_run(spec, workspace=root, db=folder / "store.duckdb")
    try:
        result = run_agent(ctx)
    finally:
        if ctx.provider is not None:
            ctx.provider.close()
    final = result.final_report
    # What a reader of the report sees: the model's words and the results the system
    # quotes beside them (agent.quotes); the verdict reads both.
    text = "" if final is None else quoted_text(final)
    done = result.ok and task.verdict(root, text)
    # A run the checks passed whose task is not done would be an `ok` that lies.
    undone_ok = result.ok and not task.verdict(root, text)
    return Row(
        transport=transport,
        task=task.name,
        kind=task.kind,
        ok=done,
        status=result.status,
        error_code=result.error_code,
        turns=result.turns,
        calls=len(result.attempts),
        input_tokens=sum(a.input_tokens or 0 for a in result.attempts),
        output_tokens=sum(a.output_tokens or 0 for a in result.attempts),
        seconds=round(time.perf_counter() - started, 1),
        cpu_seconds=round(time.process_time() - cpu, 1),
        final=text[:400],
        undone_ok=undone_ok,
    )


@contextmanager
def _model(server: bool) -> Iterator[tuple[dict[str, Any], str]]:
    if not server:
        yield {"name": "llamacpp:smollm2-135m"}, "SmolLM2-135M in process"
        return
    sys.path.insert(0, str(REPO / "tests" / "local"))
    from llama_server import start_llama_server  # the local test tier's helper

    srv = start_llama_server(Path(tempfile.mkdtemp(prefix="agent-tasks-server-")), wait_s=180)
    try:
        yield (
            {"name": "openai:smollm2", "server": "llamacpp", "base_url": srv.base_url},
            "SmolLM2-135M via llama_cpp.server",
        )
    finally:
        srv.stop()


def summarize(rows: list[Row]) -> list[str]:
    lines = [
        "| transport | finished and verified | one-call tasks | ok, task undone | turns (mean) "
        "| model calls | tokens in / out |",
        "|---|---|---|---|---|---|---|",
    ]
    for transport in dict.fromkeys(r.transport for r in rows):
        mine = [r for r in rows if r.transport == transport]
        one = [r for r in mine if TASK_BY_NAME[r.task].calls == 1]
        wins = sum(r.ok for r in mine)
        lines.append(
            f"| {transport} | {wins}/{len(mine)} ({100 * wins / len(mine):.0f} %) "
            f"| {sum(r.ok for r in one)}/{len(one)} "
            f"| {sum(r.undone_ok for r in mine)} "
            f"| {sum(r.turns for r in mine) / len(mine):.1f} "
            f"| {sum(r.calls for r in mine)} "
            f"| {sum(r.input_tokens for r in mine)} / {sum(r.output_tokens for r in mine)} |"
        )
    return lines


TASK_BY_NAME = {t.name: t for t in TASKS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--tasks", default=",".join(TASK_BY_NAME))
    parser.add_argument("--server", action="store_true", help="through llama_cpp.server")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-calls-per-turn", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--summarize", type=Path, default=None, help="table of an --out file")
    args = parser.parse_args(argv)
    if args.summarize:  # a run cut short still has its rows
        saved = [Row(**r) for r in json.loads(args.summarize.read_text("utf-8"))]
        print("\n".join(summarize(saved)))
        return 0
    logging.getLogger("toolwire").setLevel(logging.ERROR)  # one prompt-tools note per run
    transports = [t for t in args.transports.split(",") if t]
    tasks = [TASK_BY_NAME[n] for n in args.tasks.split(",") if n]
    rows: list[Row] = []
    base = Path(tempfile.mkdtemp(prefix="agent-tasks-"))
    with _model(args.server) as (model, label):
        print(f"# agent tasks: {label}; max_tokens {args.max_tokens}, max_iterations "
              f"{args.max_iterations}, temperature {args.temperature}", flush=True)  # fmt: skip
        # Task by task, every transport each time, fewest calls first: a run cut short
        # still covers every transport.
        for task in sorted(tasks, key=lambda t: t.calls):
            for transport in transports:
                row = run_task(task, transport, model, args, base)
                rows.append(row)
                print(
                    f"{transport:9} {task.name:14} {'ok  ' if row.ok else 'FAIL'} "
                    f"{row.status:6} {row.error_code or '-':22} turns {row.turns} "
                    f"calls {row.calls} tok {row.input_tokens}/{row.output_tokens} "
                    f"{row.seconds:6.1f}s  {row.final[:80]!r}",
                    flush=True,
                )
                if args.out:
                    args.out.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    print("\n".join(["", *summarize(rows)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
