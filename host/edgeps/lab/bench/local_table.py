"""The table of `edgeps bench local`: rows, medians per cell, the goals checked.

Pure logic. A row is a policy with its local steps H and its codecs both ways
(``"fedbuff:k=4/h8/int8/int8"``); a cell is (sensors, scenario, row). Runs
come in as `LocalRun` records (the real-broker run, plus what emulate reported
per board), cells go out as `LocalCell` medians over seeds, where a run that
missed the target counts as slower than every run that hit it, as in the
policy matrix. The goals are checked on the cells and come out as lines
that say met or not met, with the numbers.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from edgeps.lab.bench.policies_table import BrokerRun

BASELINE = "dsp/h1"  # today's per-step DSP
FEWER_BYTES = 5.0  # the best local row: at least this many times fewer bytes
SOONER = 2.0  # ... and this many times sooner than the baseline on slowlinks
ACCURACY_POINTS = 0.005  # ... with a final accuracy at most this much lower
FEDBUFF_SOONER = 2.0  # fedbuff vs fedavg on stragglers at the largest size
SIM_WITHIN = 0.20  # the simulator's time within 20% of the broker's


@dataclass(frozen=True)
class Row:
    """A policy with its local steps and its UPDATE and PARAMS codecs."""

    policy: str
    local_steps: int = 1
    compress: str = "f32"
    compress_down: str = "f32"

    @property
    def name(self) -> str:
        base = f"{self.policy}/h{self.local_steps}"
        if (self.compress, self.compress_down) == ("f32", "f32"):
            return base
        return f"{base}/{self.compress}/{self.compress_down}"

    def serve_flags(self) -> list[str]:
        """Serve's flags for this row (the policy aside); none for the defaults."""
        flags = []
        if self.local_steps != 1:
            flags += ["--local-steps", str(self.local_steps)]
        if self.compress != "f32":
            flags += ["--compress", self.compress]
        if self.compress_down != "f32":
            flags += ["--compress-down", self.compress_down]
        return flags


def parse_row(text: str) -> Row:
    """``POLICY[/hH][/UP[/DOWN]]`` -> Row; DOWN defaults to f32, H to 1."""
    parts = [p.strip() for p in text.strip().split("/")]
    if not parts[0] or any(not p for p in parts):
        raise ValueError(f"bad row {text!r}: expected POLICY[/hH][/UP[/DOWN]]")
    policy, rest, steps = parts[0], parts[1:], 1
    if rest and rest[0][:1] == "h" and rest[0][1:].isdigit():
        steps = int(rest.pop(0)[1:])
    if steps < 1 or len(rest) > 2:
        raise ValueError(f"bad row {text!r}: expected POLICY[/hH][/UP[/DOWN]], H >= 1")
    up = rest[0] if rest else "f32"
    down = rest[1] if len(rest) > 1 else "f32"
    return Row(policy, steps, up, down)


def parse_rows(text: str) -> list[Row]:
    """Rows separated by spaces or semicolons (a policy's own commas stay)."""
    rows = [parse_row(r) for r in text.replace(";", " ").split()]
    if not rows:
        raise ValueError("need at least one row")
    return rows


@dataclass
class LocalRun:
    """One real-broker run of one cell and seed, with emulate's per-board means."""

    workers: int
    scenario: str
    row: str
    broker: BrokerRun
    bytes_up: float | None = None  # per board, payload bytes, to the end of the run
    bytes_down: float | None = None
    joules: float | None = None  # per board, the energy model of emulate's usage

    @property
    def failed(self) -> bool:
        return self.broker.failed

    @property
    def up_to_target(self) -> float | None:
        """Bytes up per board less the closing messages past serve's done."""
        if self.bytes_up is None:
            return None
        return max(0.0, self.bytes_up - (self.broker.closing_up or 0.0))

    @property
    def down_to_target(self) -> float | None:
        """Bytes down per board less the closing messages (the final model, STOP)."""
        if self.bytes_down is None:
            return None
        return max(0.0, self.bytes_down - (self.broker.closing_down or 0.0))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self.broker)
        out.update(workers=self.workers, scenario=self.scenario, row=self.row,
                   bytes_up=self.bytes_up, bytes_down=self.bytes_down,
                   joules=self.joules)  # fmt: skip
        return out


def run_from_dict(d: dict[str, Any]) -> LocalRun:
    """A `LocalRun` back from its ``to_dict()``."""
    names = {f.name for f in fields(BrokerRun)}
    broker = BrokerRun(**{k: v for k, v in d.items() if k in names})
    usage = d.get("bytes_up"), d.get("bytes_down"), d.get("joules")
    return LocalRun(int(d["workers"]), broker.scenario, str(d["row"]), broker, *usage)


def median_time(times: list[float | None]) -> float | None:
    """The median with a miss (None) slower than every hit; None if that is a miss."""
    if not times:
        return None
    med = statistics.median(math.inf if t is None else t for t in times)
    return None if math.isinf(med) else float(med)


def training_time(run: BrokerRun) -> float | None:
    """Seconds from the run's first UPDATE to the target; None: missed or unseen."""
    if run.time_to_target is None or run.first_update is None:
        return None
    return max(0.0, run.time_to_target - run.first_update)


def _median(xs: list[float | None]) -> float | None:
    got = [x for x in xs if x is not None and math.isfinite(x)]
    return float(statistics.median(got)) if got else None


@dataclass
class LocalCell:
    """One (sensors, scenario, row): medians over its runs, and the simulator's."""

    workers: int
    scenario: str
    row: str
    runs: list[LocalRun] = field(default_factory=list)
    sim_time: float | None = None  # the simulator's median seconds to the target
    sim_bytes_up: float | None = None
    sim_joules: float | None = None

    @property
    def ok(self) -> list[LocalRun]:
        return [r for r in self.runs if not r.failed]

    @property
    def failures(self) -> list[LocalRun]:
        return [r for r in self.runs if r.failed]

    @property
    def time(self) -> float | None:
        return median_time([r.broker.time_to_target for r in self.ok])

    @property
    def train_time(self) -> float | None:
        """Median seconds from the first UPDATE the broker carried to the target."""
        return median_time([training_time(r.broker) for r in self.ok])

    @property
    def join_span(self) -> float | None:
        """Median seconds from the first sensor's HELLO to the last one's."""
        return _median([r.broker.joins[-1] if r.broker.joins else None
                        for r in self.ok])  # fmt: skip

    @property
    def reached(self) -> int:
        return sum(r.broker.time_to_target is not None for r in self.ok)

    @property
    def accuracy(self) -> float | None:
        return _median([r.broker.final_accuracy for r in self.ok])

    @property
    def bytes_up(self) -> float | None:
        return _median([r.up_to_target for r in self.ok])

    @property
    def bytes_down(self) -> float | None:
        return _median([r.down_to_target for r in self.ok])

    @property
    def bytes_total(self) -> float | None:
        both = [
            up + down
            for r in self.ok
            if (up := r.up_to_target) is not None
            and (down := r.down_to_target) is not None
        ]
        return _median(list(both))

    @property
    def joules(self) -> float | None:
        return _median([r.joules for r in self.ok])

    def real_over_sim(self) -> float | None:
        real, sim = self.time, self.sim_time
        if real is None or sim is None or sim <= 0:
            return None
        return real / sim

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "scenario": self.scenario,
            "row": self.row,
            "bytes_up_per_board": self.bytes_up,
            "bytes_down_per_board": self.bytes_down,
            "time_to_target": self.time,
            "train_time": self.train_time,
            "join_span": self.join_span,
            "final_accuracy": self.accuracy,
            "joules_per_board": self.joules,
            "sim_time_to_target": self.sim_time,
            "sim_bytes_up_per_board": self.sim_bytes_up,
            "sim_joules_per_board": self.sim_joules,
            "real_over_sim": self.real_over_sim(),
            "reached": self.reached,
            "ok_runs": len(self.ok),
            "failed_runs": len(self.failures),
        }


Key = tuple[int, str, str]  # (sensors, scenario, row name)


def build_cells(keys: list[Key], runs: list[LocalRun]) -> list[LocalCell]:
    """The cells of ``keys`` in that order, each with its runs."""
    cells = {k: LocalCell(*k) for k in keys}
    for r in runs:
        key = (r.workers, r.scenario, r.row)
        if key not in cells:
            raise ValueError(f"run of {key} is outside the grid")
        cells[key].runs.append(r)
    return [cells[k] for k in keys]


def _num(v: float | None, spec: str) -> str:
    return "-" if v is None or not math.isfinite(v) else format(v, spec)


def table(cells: list[LocalCell], *, with_sim: bool = True) -> str:
    """One line per cell: bytes up/down and J per board, s, accuracy, sim s."""
    head = ["sensors", "scenario", "row", "up B/board", "down B/board", "s",
            "train s", "final acc", "J/board", "runs"]  # fmt: skip
    if with_sim:
        head += ["sim s", "real/sim"]
    body = []
    for c in cells:
        runs = f"{c.reached}/{len(c.ok)}"
        if c.failures:
            runs += f" f{len(c.failures)}"
        line = [str(c.workers), c.scenario, c.row, _num(c.bytes_up, ".0f"),
                _num(c.bytes_down, ".0f"), _num(c.time, ".1f"),
                _num(c.train_time, ".1f"),
                _num(c.accuracy, ".3f"), _num(c.joules, ".2f"), runs]  # fmt: skip
        if with_sim:
            line += [_num(c.sim_time, ".1f"), _num(c.real_over_sim(), ".2f")]
        body.append(line)
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for b in body:
        lines.append("  ".join(x.ljust(w) for x, w in zip(b, widths, strict=True)))
    return "\n".join(line.rstrip() for line in lines)


@dataclass
class Goal:
    """One goal at one place: met or not, and the sentence with its numbers."""

    name: str
    met: bool | None  # None: it could not be checked (a run is missing)
    text: str

    def line(self) -> str:
        verdict = {True: "met", False: "NOT MET", None: "not checked"}[self.met]
        return f"goal {self.name}: {verdict}: {self.text}"


def _is_local(row: str) -> bool:
    return parse_row(row).local_steps > 1


def best_local_goal(cells: list[LocalCell], workers: int) -> Goal:
    """On slowlinks: a local row with 5x fewer bytes, 2x sooner, accuracy kept."""
    name = f"local rounds vs {BASELINE}, slowlinks, {workers} sensors"
    here = {
        c.row: c for c in cells if c.workers == workers and c.scenario == "slowlinks"
    }
    base = here.get(BASELINE)
    if base is None or base.time is None or not base.bytes_total:
        why = "no run" if base is None else "it missed the target or has no bytes"
        return Goal(name, None, f"{BASELINE}: {why}")
    assert base.accuracy is not None
    checked = []
    for c in here.values():
        if not _is_local(c.row) or c.time is None or not c.bytes_total:
            continue
        fewer, sooner = base.bytes_total / c.bytes_total, base.time / c.time
        drop = base.accuracy - (c.accuracy if c.accuracy is not None else -math.inf)
        met = fewer >= FEWER_BYTES and sooner >= SOONER and drop <= ACCURACY_POINTS
        checked.append((met, fewer, sooner, drop, c))
    if not any(_is_local(row) for row in here):
        return Goal(name, None, "no local-rounds row (H > 1) in the table")
    if not checked:
        return Goal(name, False, "no local-rounds row reached the target")
    # the row that meets it with the fewest bytes, else the fewest bytes
    met, fewer, sooner, drop, c = max(checked, key=lambda x: (x[0], x[1]))
    text = (
        f"{c.row}: {fewer:.1f}x fewer bytes per board (>= {FEWER_BYTES:g}x), "
        f"{sooner:.2f}x sooner (>= {SOONER:g}x: {c.time:.1f} s vs {base.time:.1f} s), "
        f"accuracy {c.accuracy:.3f} vs {base.accuracy:.3f} "
        f"(at most {100 * ACCURACY_POINTS:g} point lower)"
    )
    return Goal(name, met, text)


def fedbuff_goal(cells: list[LocalCell], workers: int, max_time: float) -> Goal:
    """On stragglers: fedbuff at least 2x sooner than fedavg (same H, codecs)."""
    name = f"fedbuff vs fedavg, stragglers, {workers} sensors"
    here = [c for c in cells if c.workers == workers and c.scenario == "stragglers"]
    pairs = []
    for fb in here:
        r = parse_row(fb.row)
        if r.policy.partition(":")[0] != "fedbuff":
            continue
        for fa in here:
            a = parse_row(fa.row)
            same = (a.local_steps, a.compress, a.compress_down) == (
                r.local_steps, r.compress, r.compress_down
            )  # fmt: skip
            if a.policy.partition(":")[0] == "fedavg" and same and fa.ok and fb.ok:
                pairs.append((fb, fa))
    if not pairs:
        return Goal(name, None, "no fedbuff and fedavg rows with runs to compare")
    fb, fa = pairs[0]
    if fb.time is None:
        return Goal(name, False, f"{fb.row} missed the target in {max_time:g} s")
    if fa.time is None:  # fedavg's time is at least the bound it missed in
        sooner = max_time / fb.time
        text = (
            f"{fb.row} {fb.time:.1f} s, {fa.row} missed in {max_time:g} s: "
            f"at least {sooner:.2f}x sooner (>= {FEDBUFF_SOONER:g}x)"
        )
        return Goal(name, sooner >= FEDBUFF_SOONER, text)
    sooner = fa.time / fb.time
    text = (
        f"{fb.row} {fb.time:.1f} s vs {fa.row} {fa.time:.1f} s: {sooner:.2f}x "
        f"sooner (>= {FEDBUFF_SOONER:g}x)"
    )
    return Goal(name, sooner >= FEDBUFF_SOONER, text)


def sim_goal(cells: list[LocalCell]) -> Goal:
    """The simulator's time within 20% of the broker's on every cell."""
    name = f"simulator within {100 * SIM_WITHIN:g}% of the broker"
    off, missed, n = [], [], 0
    for c in cells:
        if not c.ok:
            continue
        if c.time is None and c.sim_time is None:
            continue  # both missed: nothing to compare
        if c.time is None or c.sim_time is None:
            who = "the broker" if c.time is None else "the simulator"
            missed.append(f"{c.workers}/{c.scenario}/{c.row} ({who} missed)")
            continue
        n += 1
        ratio = c.time / c.sim_time
        if abs(ratio - 1.0) > SIM_WITHIN:
            off.append(f"{c.workers}/{c.scenario}/{c.row} {ratio:.2f}x")
    if not n and not missed:
        return Goal(name, None, "no cell where either reached the target")
    bad = off + missed
    text = f"{n - len(off)} of {n + len(missed)} cells within"
    if bad:
        text += "; outside: " + ", ".join(bad)
    return Goal(name, not bad, text)


def goals(
    cells: list[LocalCell], max_time: float, *, with_sim: bool = True
) -> list[Goal]:
    """Every goal the cells allow: per size on slowlinks, the largest size's
    fedbuff, and the simulator's (unless ``with_sim`` is False)."""
    sizes = sorted({c.workers for c in cells})
    out = [
        best_local_goal(cells, n)
        for n in sizes
        if any(c.workers == n and c.scenario == "slowlinks" for c in cells)
    ]
    strag = [n for n in sizes if any(c.scenario == "stragglers" and c.workers == n
                                     for c in cells)]  # fmt: skip
    if strag:
        out.append(fedbuff_goal(cells, max(strag), max_time))
    if with_sim:
        out.append(sim_goal(cells))
    return out


def failure_lines(cells: list[LocalCell]) -> list[str]:
    """Every failed run: where, why, and the last lines of its stderr."""
    out = []
    for c in cells:
        for r in c.failures:
            b = r.broker
            out.append(f"FAILED {c.workers} {c.scenario} {c.row} seed {b.seed}: "
                       f"{b.error}")  # fmt: skip
            out.extend(f"    {line}" for line in b.stderr_tail.splitlines())
    return out
