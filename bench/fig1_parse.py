"""Figure 1: what parsing costs a run, and what a hostile reply costs a parser.

Share of a run. Each agent transport's shipped spec (``specs/agent-*.yaml``)
runs its recorded replay (``tests/data/replay/agent-*.jsonl``, 5-8 replies) into
a scratch workspace and a fresh DuckDB file, and the librarian runs a replayed
dry run of one note per turn; each run in a fresh Python process, so caches are
cold and the nonce is new, as in every real run. The parse functions the job
calls are wrapped with a clock; the share is their CPU time over the run's
(prepare to result). Target: parse <= 2 % of a run. A model call takes seconds, the
replay microseconds: with a model the share only falls.

Hostile input. Each parser reads a reply made to hit its slowest path, at 10 MB
(7.5 MB for the parsers bounded at 8 MB, which refuse 10 MB before reading it)
and at a quarter of that, in a fresh process: its time in units of a C scan of
the same text (``str.count``, so that caches and the memory bus cancel out);
linear: the large input costs at most 3x as many scans as the small one (a
quadratic parser costs 4x). And the peak memory the parse adds (VmHWM),
against the input's size.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Figure, Row, Target

__all__ = ["HOSTILE", "TRANSPORTS", "run"]

REPO = Path(__file__).resolve().parents[1]
SHARE_TARGET = Target("value", "<=", 2.0, "<= 2 % of the run")
# Linear: the parse costs about as many C scans of its input (``text.count("<")``) at 4x
# the size as at 1x; a quadratic parser costs 4x as many. 3x, not 2x: a regex stepping
# through 10 MB measured up to 2x more scans than through 2.5 MB (caches, a shared bus).
LINEAR_TARGET = Target("ratio", "<=", 3.0, "<= 3x the cost at a quarter the size")
MEMORY_TARGET = Target("ratio", "<=", 4.0, "<= 4x the input")
MB = 1_000_000
LIBRARIAN_TURNS = 26  # the runbooks vault's request count (figure 6)
NONCE = "ai-agent-1a2b3c4d"

# transport -> (module holding the job, the parse functions it calls, by their protocol home)
TRANSPORTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "xml": (
        "toolwire.agent",
        ("toolwire.protocols.slots:parse_slots", "toolwire.protocols.native:parse_native"),
    ),
    "xml-final": (
        "toolwire.agent",
        ("toolwire.protocols.slots:parse_slots", "toolwire.protocols.native:parse_native"),
    ),
    "native": (
        "toolwire.agent",
        (
            "toolwire.protocols.native:parse_native",
            "toolwire.protocols.native:find_leaked_calls",
        ),
    ),
    "execute": ("toolwire.agent", ("toolwire.protocols.execute:parse_execute",)),
    "xct": ("toolwire.agent", ("toolwire.protocols.xct:parse_decision",)),
    "librarian (xml_attrless)": (
        "toolwire.librarian.job",
        ("toolwire.protocols.attrless:parse_response",),
    ),
}


# ---------------------------------------------------------------- hostile inputs


@dataclass(frozen=True)
class Hostile:
    """A reply made to hit one parser's slowest path: ``head`` + ``unit`` repeated + ``tail``."""

    what: str
    parser: str  # "module:function"
    head: str
    unit: str
    tail: str
    largest: int  # the largest size the parser reads (bytes; ASCII, so characters)
    kwargs: Callable[[], dict[str, Any]] = dict

    def build(self, size: int) -> tuple[str, Callable[[], Any]]:
        import importlib

        module, name = self.parser.split(":")
        parse = getattr(importlib.import_module(module), name)
        fill = max(1, (size - len(self.head) - len(self.tail)) // len(self.unit))
        text = self.head + self.unit * fill + self.tail
        kwargs = self.kwargs()
        return text, lambda: parse(text, **kwargs)


def _any_tool() -> dict[str, Any]:
    from toolwire.protocols.execute import ANY_TOOL

    return {"tools": ANY_TOOL}


_BOUNDED = 7_500_000  # under the 8 MB bound of attrless, execute and xct
HOSTILE = {
    "xml_attrless parse_response": Hostile(
        "a field of '<' that opens no tag, and entities",
        "toolwire.protocols.attrless:parse_response",
        "<librarian_response><request_id>r</request_id><status>ok</status><summary>",
        "a < b &amp; c ",
        "</summary><operations></operations><warnings></warnings></librarian_response>",
        _BOUNDED,
    ),
    # Every empty operation is a problem: the old checker searched its list of problems
    # for each new one (223 s for 32,000 of them), and the tree grew to 15x the input.
    "xml_attrless parse_response, many empty operations": Hostile(
        "empty <operation> blocks (refused past 50,000 elements)",
        "toolwire.protocols.attrless:parse_response",
        "<librarian_response><request_id>r</request_id><status>ok</status><summary>s"
        "</summary><operations>",
        "<operation></operation>",
        "</operations><warnings></warnings></librarian_response>",
        _BOUNDED,
    ),
    "slots parse_slots": Hostile(
        "unclosed tags of another nonce",
        "toolwire.protocols.slots:parse_slots",
        "",
        '<ai-agent-0badc0de-0001 tool="read_file">{"path": "a"}',
        "",
        10 * MB,
        lambda: {"nonce": NONCE, "allowed_tools": None, "slots": None, "mode": "xml"},
    ),
    # The two shapes the old scanner was quadratic on (16 s at 80,000 tags), kept here so
    # this figure would show it again: a bad closing tag after many unclosed ones, and
    # many <think> blocks.
    "slots parse_slots, a bad close last": Hostile(
        "unclosed tags of another nonce, then a closing tag that does not close",
        "toolwire.protocols.slots:parse_slots",
        "",
        '<ai-agent-0badc0de-0001 tool="x">{}',
        "</ai-agent-0badc0de-0001!",
        10 * MB,
        lambda: {"nonce": NONCE, "allowed_tools": None, "slots": None, "mode": "xml"},
    ),
    "slots parse_slots, many <think>": Hostile(
        "many short <think> blocks",
        "toolwire.protocols.slots:parse_slots",
        "",
        "<think>a</think>",
        "",
        10 * MB,
        lambda: {"nonce": NONCE, "allowed_tools": None, "slots": None, "mode": "xml"},
    ),
    "execute parse_execute": Hostile(
        "an argument value of '<' that opens no tag",
        "toolwire.protocols.execute:parse_execute",
        "<execute><write_file><content>",
        "x < y ",
        "</content></write_file></execute>",
        _BOUNDED,
        _any_tool,
    ),
    "xct parse_decision": Hostile(
        "a string of surrogate-pair and quote escapes",
        "toolwire.protocols.xct:parse_decision",
        '{"next_step": {"tool": "write_file", "arguments": {"content": "',
        '\\ud83d\\ude00 \\" ',
        '"}, "goal": "g"}}',
        _BOUNDED,
    ),
    "native find_leaked_calls": Hostile(
        "unclosed <invoke> tags",
        "toolwire.protocols.native:find_leaked_calls",
        "",
        '<invoke name="read_file"><parameter name="path">a',
        "",
        10 * MB,
    ),
}


# ---------------------------------------------------------------- children


def _peak_bytes() -> int:
    """This process's peak resident memory (VmHWM): ru_maxrss survives execve."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _child_hostile(parser: str, size: int) -> dict[str, Any]:
    from toolwire.errors import ProtocolError

    text, parse = HOSTILE[parser].build(size)
    clock = time.process_time  # CPU seconds: the machine is shared, wall time is not ours

    def scan() -> float:  # a C scan over the same memory: what the caches make of it
        start = clock()
        text.count("<")
        return clock() - start

    scans = [scan() for _ in range(3)]
    before = _peak_bytes()
    start = clock()
    try:
        parse()
        outcome = "parsed"
    except ProtocolError as exc:
        outcome = f"{exc.code}: {','.join(exc.details[:1])}"
    seconds = clock() - start
    peak = max(0, _peak_bytes() - before)
    for _ in range(4 if seconds < 0.5 else 0):  # a fast parse is timed warm, as the scan is
        start = clock()
        try:
            parse()
        except ProtocolError:
            pass
        seconds = min(seconds, clock() - start)
        scans.append(scan())
    return {
        "seconds": seconds,
        "scan_seconds": min(scans),
        "peak_extra": peak,
        "outcome": outcome,
    }


class _Clock:
    """Wraps the parse functions a job calls; sums their wall and CPU time."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.calls = 0

    def wrap(self, target: str) -> None:
        """Time ``module:name`` in every toolwire module that holds it under that name
        (import the job first): the job's callers move between modules, the function not."""
        import importlib

        module_name, name = target.split(":")
        original = getattr(importlib.import_module(module_name), name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.wall += time.perf_counter() - wall
                self.cpu += time.process_time() - cpu
                self.calls += 1

        for module in list(sys.modules.values()):
            held = getattr(module, "__name__", "").startswith("toolwire.")
            if held and getattr(module, name, None) is original:
                setattr(module, name, timed)


def _child_share(transport: str, tmp: Path) -> dict[str, Any]:
    import importlib

    job, targets = TRANSPORTS[transport]
    importlib.import_module(job)
    clock = _Clock()
    for target in targets:
        clock.wrap(target)
    if transport.startswith("librarian"):
        from bench.fig2_engine import ReplaySetup
        from toolwire.librarian.job import run_librarian

        setup = ReplaySetup(tmp / "lib", LIBRARIAN_TURNS)
        wall, cpu = time.perf_counter(), time.process_time()
        ctx = setup.prepare(dry_run=True)
        result = run_librarian(ctx)
        status, turns = result.status, len(result.attempts)
    else:
        from toolwire.agent import prepare_agent_run, run_agent

        workspace = shutil.copytree(REPO / "tests/data/tools/scratch", tmp / "ws")
        wall, cpu = time.perf_counter(), time.process_time()
        ctx = prepare_agent_run(
            REPO / "specs" / f"agent-{transport}.yaml",
            workspace=workspace,
            db=tmp / "store.duckdb",
            model=f"replay:{REPO / 'tests/data/replay' / f'agent-{transport}.jsonl'}",
        )
        assert ctx.provider is not None  # prepare_agent_run opens it
        try:
            agent = run_agent(ctx)
        finally:
            ctx.provider.close()
        status, turns = agent.status, agent.turns
    run_wall, run_cpu = time.perf_counter() - wall, time.process_time() - cpu
    if status != "ok":
        raise RuntimeError(f"{transport}: the replayed run ended {status}")
    return {
        "run_wall": run_wall,
        "run_cpu": run_cpu,
        "parse_wall": clock.wall,
        "parse_cpu": clock.cpu,
        "parse_calls": clock.calls,
        "turns": turns,
    }


def _child(argv: list[str]) -> None:
    kind, name = argv[0], argv[1]
    if kind == "hostile":
        out = _child_hostile(name, int(argv[2]))
    else:
        with tempfile.TemporaryDirectory(prefix="toolwire-fig1-") as tmp:
            out = _child_share(name, Path(tmp))
    print(json.dumps(out))


def _spawn(*args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.fig1_parse", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- figure


def _share_rows(fig: Figure, repeats: int) -> None:
    for transport in TRANSPORTS:
        runs = [_spawn("share", transport) for _ in range(repeats)]
        # CPU seconds: parsing only computes, so on a shared machine its wall time grows
        # with the load far more than a run's (which also waits on files and the store).
        share = statistics.median(100 * r["parse_cpu"] / r["run_cpu"] for r in runs)
        wall = statistics.median(100 * r["parse_wall"] / r["run_wall"] for r in runs)
        parse_ms = statistics.median(r["parse_cpu"] * 1000 for r in runs)
        run_ms = statistics.median(r["run_cpu"] * 1000 for r in runs)
        turns, calls = runs[0]["turns"], runs[0]["parse_calls"]
        fig.add(
            Row(
                f"{transport}: parse share of a replayed run ({turns} turns, {calls} parser "
                f"calls; {parse_ms:.2f} of {run_ms:.0f} CPU ms)",
                share,
                "% of run",
                target=SHARE_TARGET,
                why=f"{parse_ms * 1000 / max(turns, 1):.0f} CPU us of parsing per turn; "
                f"wall-time share {wall:.2f} %; median of {repeats} fresh processes",
            )
        )
        fig.extra.setdefault("share", {})[transport] = runs


def _scans(measured: dict[str, Any]) -> float:
    """A parse's time in C scans of its own input (see LINEAR_TARGET)."""
    return float(measured["seconds"] / max(measured["scan_seconds"], 1e-9))


def _hostile_rows(fig: Figure) -> None:
    for parser, hostile in HOSTILE.items():
        what, largest = hostile.what, hostile.largest
        # The cost is taken in units of a C scan of the same text at the same size: a
        # plain str.find costs 17x more at 10 MB than at 2.5 MB on this machine (caches,
        # a shared memory bus), which alone would look quadratic.
        quarter = largest // 4
        small = _spawn("hostile", parser, str(quarter))
        big = _spawn("hostile", parser, str(largest))
        note = ""
        if largest < 10 * MB:
            refused = _spawn("hostile", parser, str(10 * MB))
            note = f"; 10 MB refused in {refused['seconds'] * 1000:.2f} ms ({refused['outcome']})"
        size = f"{largest / MB:g} MB"
        cost, small_cost = _scans(big), _scans(small)
        if cost > LINEAR_TARGET.threshold * small_cost and largest >= 10 * MB:
            # Growth, or one size the machine handles badly? Larger inputs tell.
            more = {n: _scans(_spawn("hostile", parser, str(n * MB))) for n in (20, 40)}
            note += "; at " + ", ".join(f"{n} MB {c:.1f}" for n, c in more.items()) + " C scans"
            if all(c <= LINEAR_TARGET.threshold * small_cost for c in more.values()):
                note += f" (within {LINEAR_TARGET.threshold:g}x: the {size} cost is no trend)"
        fig.add(
            Row(
                f"{parser}, {size} of {what} ({largest / MB / big['seconds']:.1f} MB/s, "
                f"{big['seconds']:.2f} CPU s)",
                cost,
                "C scans",
                baseline=small_cost,
                baseline_label=f"at {quarter / MB:g} MB",
                ratio_label="x the cost at a quarter the size",
                target=LINEAR_TARGET,
                why=f"{big['outcome']}{note}",
            )
        )
        fig.add(
            Row(
                f"{parser}, peak memory added by the {size} parse",
                big["peak_extra"] / MB,
                "MB",
                baseline=largest / MB,
                baseline_label="input MB",
                ratio_label="x the input",
                target=MEMORY_TARGET,
            )
        )
        fig.extra.setdefault("hostile", {})[parser] = {f"{quarter / MB:g} MB": small, size: big}


def run(fig: Figure, *, quick: bool) -> None:
    repeats = 3 if quick else 5
    fig.method = (
        f"Share: each transport's shipped replay run, {repeats} times, each in a fresh "
        "process (cold caches, a new nonce); the parse functions the job calls are wrapped "
        "with a clock; share = their CPU time / the run's (prepare to result), median of "
        f"the runs; the librarian is a dry run of {LIBRARIAN_TURNS} one-note turns. Hostile: "
        "each parser on its worst input at its largest readable size (10 MB, or 7.5 MB "
        "under the 8 MB bound) and at a quarter of it, one fresh process per size, CPU time "
        "(the machine is shared); peak memory is VmHWM after the parse minus before it."
    )
    _share_rows(fig, repeats)
    _hostile_rows(fig)
    shares = [r.value for r in fig.rows if r.unit == "% of run" and r.value is not None]
    linear = [r for r in fig.rows if r.unit == "C scans"]
    for row in fig.missed:
        if row.unit == "MB" and row.measure.startswith("slots"):
            fig.proposals.append(
                "Slots' peak memory on a reply of refused tags is one InvalidTag (and its "
                "sentence) per tag, ~300 bytes for ~50 bytes of input: linear, but 8-9x. The "
                "model is shown 20 of them and a count; keeping the first few hundred whole "
                "and counting the rest would bound it, if the store may record a count for "
                "the rest instead of one tool_calls row each."
            )
        elif row.unit == "C scans" and "no trend" not in row.why:
            fig.proposals.append(
                f"{row.measure.split(',')[0]}: more than 3x the C scans at 4x the size: look "
                "for a search that restarts from an earlier position (quadratic)."
            )
    if shares:
        fig.extra["headline"] = (
            f"parse {min(shares):.2f}-{max(shares):.2f} % of a replayed run; hostile "
            f"{sum(r.met is True for r in linear)}/{len(linear)} parsers linear"
        )


if __name__ == "__main__":
    _child(sys.argv[1:])
