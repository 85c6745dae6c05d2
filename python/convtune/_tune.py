"""In-process tuning: tune() searches kernel configurations for problems on one device, or spreads them over
several alike devices (the GPUs of a host), stores the best in a tuning database and reports progress to a
callback; later plans pick the results up."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _checks, _convtune
from . import _errors
from ._conv import Plan, _check_workspace_limit
from ._convtune import Problem, TuningDatabase

ProblemLike = Union[Problem, str, Plan]


@dataclass
class TuneEvent:
    """What the progress callback receives. ``kind``: 'task_started' (index, count; every task at the start of
    the run), 'trial' (after each candidate: trial, tried, fraction of the task's share used) or 'task_done' (result,
    whose ``space`` is the task's search space, enumerated when its search started: 0 when it never did)."""
    kind: str
    name: str
    operation: str
    problem: str
    family: str
    device: str = ""
    index: Optional[int] = None
    count: Optional[int] = None
    fraction: Optional[float] = None
    tried: Optional[int] = None
    trial: Optional[Dict[str, Any]] = None  # config, ms (None: failed), failure, note, wall_ms
    result: Optional["TuneResult"] = None


@dataclass
class TuneResult:
    """One task's outcome: a problem (named) and a kernel family on a device."""
    name: str
    operation: str
    problem: str
    family: str
    device: str
    space: int
    tried: int
    failed: int
    default_ms: Optional[float]
    best_ms: Optional[float]
    best_config: Optional[Dict[str, int]]
    stop_reason: str
    stored: Optional[str]  # 'added', 'replaced', 'kept existing' (the database had a faster one), None
    # On a problem's first task: today's plan stored as its exact entry instead of the tuned results, because it
    # was faster (timed again beside the best where they differed): 'added', 'replaced', 'kept existing' or None.
    plan_kept: Optional[str] = None
    trials: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def speedup(self) -> Optional[float]:
        """The built-in default's time over the best one."""
        if self.default_ms and self.best_ms:
            return self.default_ms / self.best_ms
        return None


def _result(d: Dict[str, Any]) -> TuneResult:
    return TuneResult(**{k: d.get(k, [] if k == "trials" else None) for k in TuneResult.__dataclass_fields__})


def _problem(p: ProblemLike) -> Problem:
    if isinstance(p, Problem):
        return p
    if isinstance(p, Plan):
        return p.problem
    if isinstance(p, str):
        return _convtune.parse_problem(_checks.text(p, "problems"))
    raise TypeError(f"problems: expected convtune.Problem, its text or a convtune.Plan, got {type(p).__name__}")


def _with_directions(problem: Problem, directions: Optional[Union[str, Sequence[str]]]) -> List[Problem]:
    """`problem` in each of `directions` ('all' or a list); itself when None or a GEMM."""
    if directions is None or problem.kind != "convolution":
        return [problem]
    wanted = ["fwd", "bwd-data", "bwd-filter"] if directions == "all" else (
        [directions] if isinstance(directions, str) else list(directions))
    for d in wanted:
        if d not in ("fwd", "bwd-data", "bwd-filter"):
            raise _errors.InvalidArgument(f"directions: {d!r} is not a direction: expected 'all' or any of 'fwd', "
                                          "'bwd-data', 'bwd-filter'")
    fields = dict(item.split("=", 1) for item in problem.text.split(","))
    return [_convtune.parse_problem(",".join(f"{k}={d if k == 'dir' else v}" for k, v in fields.items()))
            for d in wanted]


def tune(problems: Union[ProblemLike, Iterable[ProblemLike], Mapping[str, ProblemLike]], *,
         device: Union[str, Sequence[str], None] = None, budget: float = 60.0, strategy: str = "annealing",
         family: str = "all", directions: Union[str, Sequence[str], None] = None,
         database: Union[TuningDatabase, str, None] = None, progress: Optional[Callable[[TuneEvent], Any]] = None,
         max_candidates: int = 0, max_fraction: float = 0.0, warmup: int = 1, repeats: int = 5,
         abort_factor: float = 1.5, seed: int = 1, jobs: int = 0, only: Optional[Mapping[str, Sequence[int]]] = None,
         skip_tuned: bool = False, save: bool = True, workspace_limit: Optional[int] = None) -> List[TuneResult]:
    """Tunes every problem x kernel family that computes it, within ``budget`` seconds in all, and stores the
    fastest verified configuration of each in ``database`` (default: the user's, saved after every task).

    ``problems``: a Problem, its text or a Plan, a list of them, or a dict name -> problem (names label the
    results; by default the problem's text). ``directions``: 'all' or a list expands each convolution into those
    directions. ``device``: a name, or a list of alike devices (['cuda:0', 'cuda:1']) to share the tasks, each
    with the budget share and seed it would get on one device, so two GPUs take about half the time.
    ``progress(event)`` is called after every step (a TuneEvent); raising from it, or Ctrl-C, stops the run.
    ``workspace_limit``: the scratch bytes a candidate may take (None: the device's default); families and
    configurations over it are not tuned. The rest are the command line's options (docs/LIBRARY.md,
    ``convtune tune --help``).
    """
    if isinstance(problems, Mapping):
        named: List[Tuple[Optional[str], Problem]] = [(_checks.text(str(n), "problems key"), _problem(p))
                                                      for n, p in problems.items()]
    elif isinstance(problems, (Problem, str, Plan)):
        named = [(None, _problem(problems))]
    else:
        named = [(None, _problem(p)) for p in problems]
    expanded = [(name or q.text, q) for name, p in named for q in _with_directions(p, directions)]
    _check_workspace_limit(workspace_limit)
    if workspace_limit is not None:
        workspace_limit = _checks.integer(workspace_limit, "workspace_limit")
    if device is None:
        devices = [_convtune.best_device()]
    elif isinstance(device, str):
        devices = [_checks.text(device, "device")]
    else:
        devices = [_checks.text(d, "device") for d in device]
    _checks.text(strategy, "strategy")
    _checks.text(family, "family")
    budget = _checks.real(budget, "budget")
    max_fraction = _checks.real(max_fraction, "max_fraction")
    abort_factor = _checks.real(abort_factor, "abort_factor")
    max_candidates = _checks.integer(max_candidates, "max_candidates", 0)
    warmup = _checks.integer(warmup, "warmup", 0)
    repeats = _checks.integer(repeats, "repeats", 1)
    seed = _checks.integer(seed, "seed", 0)
    jobs = _checks.integer(jobs, "jobs", 0)
    if only is not None and not isinstance(only, Mapping):
        raise TypeError(f"only: expected a mapping of parameter names to lists of ints, got {type(only).__name__}")
    checked_only = {_checks.text(k, "only key"): [_checks.integer(v, f"only[{k!r}]") for v in vs]
                    for k, vs in (only or {}).items()}
    if database is None:
        database = TuningDatabase()
    elif isinstance(database, str):
        database = TuningDatabase(_checks.text(database, "database"))
    elif not isinstance(database, TuningDatabase):
        raise TypeError(f"database: expected a convtune.TuningDatabase or a path, got {type(database).__name__}")

    def relay(d: Dict[str, Any]) -> None:
        if progress is None:
            return
        kind = d.pop("event")
        if kind == "task_done":
            result = _result(d["result"])
            progress(TuneEvent(kind, result.name, result.operation, result.problem, result.family, result.device,
                               result=result))
        else:
            progress(TuneEvent(kind, d["name"], d["operation"], d["problem"], d["family"], d.get("device", ""),
                               d.get("index"), d.get("count"), d.get("fraction"), d.get("tried"),
                               d.get("trial")))

    results, _skipped = _convtune.tune(
        devices, expanded, database, family=family, budget_seconds=budget, strategy=strategy,
        max_fraction=max_fraction, max_candidates=max_candidates, warmup=warmup, repeats=repeats,
        abort_factor=abort_factor, seed=seed, jobs=jobs, only=checked_only, skip_tuned=bool(skip_tuned),
        save=bool(save), progress=relay, workspace_limit=workspace_limit)
    return [_result(r) for r in results]
