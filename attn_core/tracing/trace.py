"""Trace: the intermediate tensors a module really computed, in order.

``trace = Trace(); out = module(x, trace=trace)`` fills ``trace`` with one
:class:`Step` per line of the forward pass worth looking at. The dashboard draws
these steps; it never recomputes them. With ``trace=None`` (the default) the
modules skip all of this, so tracing costs nothing when nobody looks.

A forward records a tensor right after the line that made it: ``record(trace, "attn_scores",
attn_scores)``. The step's code is taken from the source itself (:func:`source_of`): the nearest
statement above the call that writes that variable, so the code a page shows is the line that ran,
and the forward reads like the book's. What a step *is* (its kind, note, axis names) comes from the one
table in :mod:`attn_core.tracing.steps`.

A forward also says what it records *in*: ``with scope(trace, "head", i):`` around one head's lines,
``"tile", i, j`` around one tile's, ``"layer", i`` around one layer's. Each step keeps the scopes it was recorded
in (:class:`Scope`: a kind and an index), so pages read a trace's structure (how many heads, which tiles) from
what it declares, not from step names.

A ``Trace()`` stores a copy of each tensor. ``Trace(copy=False)`` stores the CPU tensors
themselves: at GPT-2 size and 1,024 tokens the copies cost much of a traced forward's time and
memory (docs/measurements.md). The code then calls :meth:`Trace.before_change` before changing a recorded tensor in
place (``masked_fill_``), and the trace checks it was told: a recorded tensor changed behind its
back raises instead of showing numbers it never had.
"""

from __future__ import annotations

import ast
import functools
import linecache
import sys
import textwrap
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attn_core.messages import Problem
from attn_core.tracing.steps import STEPS, scope_name


@dataclass(frozen=True)
class Scope:
    """One level of a trace's structure: what a forward recorded some steps in."""

    kind: str  # "layer", "head", "kv_head", "tile", ... (attn_core.tracing.steps.SCOPES spells their names)
    index: tuple[int, ...]  # (1,) for head 2; (0, 2) for tile [0, 2]
    name: str  # its prefix in step names: "heads[1]", "tile[0,2]", "trf_blocks[1].att"


@dataclass(frozen=True)
class Flow:
    """Which variables a step's statement writes and reads, read from its source once per line (Shape flow's
    "Before this step" follows them)."""

    var: str = ""  # the variable the step's tensor is in ("" when an expression was recorded, or code was given)
    reads: tuple[str, ...] = ()  # the names the statement reads, in source order
    expr: str = ""  # an expression recorded instead of a variable: its syntax tree (ast.dump)
    parts: frozenset[str] = frozenset()  # the syntax trees of every expression inside the statement


@dataclass(frozen=True)
class Step:
    """One recorded tensor and the code line that produced it."""

    name: str  # unique within a trace, e.g. "attn_weights" or "heads[1].attn_weights"
    kind: str  # what it is, for pages that look steps up: "weights", "scores", ...
    code: str  # the source line, as a learner reads it in the book
    tensor: torch.Tensor  # detached, on the CPU: a copy (or, in a Trace(copy=False), the tensor itself)
    note: str = ""  # one line: what happened and why
    axes: tuple[str, ...] = ()  # axis names, e.g. ("b", "num_tokens", "num_heads", "head_dim")
    contiguous: bool = True  # of the tensor as computed (before the CPU copy)
    stride: tuple[int, ...] = ()  # of the tensor as computed
    prefix: str = ""  # "" for the module itself, "heads[0]" for a wrapper's head: its scopes' names joined by "."
    origin: tuple[str, int] | None = None  # (file, line) of the code in the source; None for a described step
    scopes: tuple[Scope, ...] = ()  # the scopes it was recorded in, outermost first
    flow: Flow = Flow()  # the variables its statement writes and reads

    def index(self, kind: str) -> tuple[int, ...] | None:
        """The index of the ``kind`` scope this step was recorded in (None: not in one)."""
        return next((sc.index for sc in self.scopes if sc.kind == kind), None)

    def within(self, *kinds: str) -> bool:
        """Whether every scope this step was recorded in is of one of ``kinds`` (none: the module's own level)."""
        return all(sc.kind in kinds for sc in self.scopes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    def numpy(self) -> np.ndarray:
        """The tensor as a float64 NumPy array (bool stays bool)."""
        t = self.tensor
        if t.dtype == torch.bool:
            return t.numpy()
        return t.to(torch.float64).numpy()


class ChangedInPlace(RuntimeError):
    """A tensor a ``Trace(copy=False)`` holds was changed in place without ``before_change``."""


@dataclass
class Trace:
    """An ordered list of :class:`Step`, filled by a module's ``forward``."""

    steps: list[Step] = field(default_factory=list)
    _open: tuple[Scope, ...] = ()  # the scopes open now, that a step recorded now goes into, outermost first
    prefix: str = ""  # their names joined by ".": what a step recorded now is prefixed with ("heads[1]")
    # The last recorded source tensor (weakly), its version and its copy: recording the very same,
    # unchanged tensor again (dropout in eval mode returns its input) shares the copy.
    _last: tuple | None = field(default=None, repr=False, compare=False)
    copy: bool = True  # False: keep CPU tensors themselves (see the module's docstring)
    # copy=False: (step index, the source tensor (weakly), the version it was recorded at) of each shared tensor
    _shared: list = field(default_factory=list, repr=False, compare=False)
    # The steps' names, to refuse a second step of one name without a scan (a tiled loop records thousands)
    _names: set[str] = field(default_factory=set, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._names = {s.name for s in self.steps}

    def record(
        self,
        name: str,
        tensor: torch.Tensor,
        code: str | None = None,
        note: str | None = None,
        *,
        kind: str | None = None,
        axes: tuple[str, ...] | None = None,
        depth: int = 1,
        arg: int = 1,
        **fields: object,
    ) -> None:
        """Store a detached CPU copy of ``tensor`` (later in-place edits don't reach it); in a
        ``Trace(copy=False)`` a CPU tensor itself, which then must not change in place unannounced.

        ``code``: None takes it from the source (:func:`source_of` the caller ``depth`` frames up, whose
        call has the tensor as positional argument ``arg``). ``kind``, ``note``, ``axes``: None takes them
        from :data:`attn_core.tracing.steps.STEPS` by ``name``; ``fields`` fill the note's ``{names}``."""
        origin, flow = None, Flow()
        if code is None:
            frame = sys._getframe(depth)
            code, origin, flow = _source(frame.f_code.co_filename, frame.f_lineno, arg)
        entry = STEPS.get(name)
        if entry is not None:
            kind = kind or entry.kind
            note = entry.describe(tensor, **fields) if note is None else note
            axes = entry.axes.get(tensor.ndim, ()) if axes is None else axes
        prefix = self.prefix
        full = f"{prefix}.{name}" if prefix else name
        if full in self._names:
            raise Problem("trace already has a step named {name}", name=repr(full))
        self.check()
        last = self._last
        if not self.copy and tensor.device.type == "cpu":
            copy = tensor.detach()
            self._shared.append((len(self.steps), weakref.ref(tensor), tensor._version))
        elif last is not None and last[0]() is tensor and last[1] == tensor._version:
            copy = last[2]  # the same tensor, unchanged since it was recorded: share its copy
        else:
            copy = tensor.detach().to("cpu", copy=True)
        self._last = (weakref.ref(tensor), tensor._version, copy)
        self._names.add(full)
        self.steps.append(
            Step(
                name=full,
                kind=kind or name,
                code=code,
                tensor=copy,
                note=note or "",
                axes=tuple(axes or ()),
                contiguous=tensor.is_contiguous(),
                stride=tuple(tensor.stride()),
                prefix=prefix,
                origin=origin,
                scopes=self._open,
                flow=flow,
            )
        )

    def before_change(self, tensor: torch.Tensor) -> None:
        """``tensor`` is about to change in place: the steps that hold it get a copy of it as recorded."""
        keep = []
        for i, ref, version in self._shared:
            if ref() is tensor:
                self.steps[i] = replace(self.steps[i], tensor=self.steps[i].tensor.clone())
            else:
                keep.append((i, ref, version))
        self._shared = keep

    def check(self) -> None:
        """Raise :class:`ChangedInPlace` if a tensor this trace holds (``copy=False``) changed since it was
        recorded (views share their base's version counter, so a change through a view counts too)."""
        for i, _, version in self._shared:
            if self.steps[i].tensor._version != version:
                raise ChangedInPlace(f"step {self.steps[i].name!r} was changed in place after it was recorded: "
                                     "call trace.before_change(tensor) before the in-place operation")

    @contextmanager
    def scope(self, kind: str, *index: int, name: str | None = None) -> Iterator[Trace]:
        """Record the steps inside in one ``kind`` scope (``"head", 1``; ``"tile", 0, 2``), named ``name`` in step
        names (None: as :data:`attn_core.tracing.steps.SCOPES` spells the kind)."""
        outer, outer_prefix = self._open, self.prefix
        inner = Scope(kind, tuple(index), name or scope_name(kind, *index))
        self._open, self.prefix = (*outer, inner), f"{outer_prefix}.{inner.name}" if outer_prefix else inner.name
        try:
            yield self
        finally:
            self._open, self.prefix = outer, outer_prefix

    def here(self, name: str) -> Step:
        """The step ``name`` recorded in the current scope (a wrapper's head reads its own weights)."""
        prefix = self.prefix
        return self[f"{prefix}.{name}" if prefix else name]

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step {name!r}; steps: {', '.join(self.names())}")

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.steps)

    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def kinds(self) -> list[str]:
        """Distinct step kinds, in first-seen order."""
        return list(dict.fromkeys(s.kind for s in self.steps))

    def of_kind(self, kind: str) -> list[Step]:
        """Every step of one kind, in order (one per head for a wrapper)."""
        return [s for s in self.steps if s.kind == kind]

    def last(self) -> Step:
        return self.steps[-1]

    def prefixes(self) -> list[str]:
        """The steps' distinct non-empty prefixes (``Step.prefix``), in first-seen order (one per layer of a GPT)."""
        return list(dict.fromkeys(s.prefix for s in self.steps if s.prefix))

    def scope_kinds(self) -> list[str]:
        """The kinds of scope the steps were recorded in ("layer", "head", "tile", ...), in first-seen order."""
        return list(dict.fromkeys(sc.kind for s in self.steps for sc in s.scopes))

    def scopes_of_kind(self, kind: str) -> list[Scope]:
        """Every distinct scope of one kind, in first-seen order (one per head of a wrapper, per computed tile)."""
        return list(dict.fromkeys(sc for s in self.steps for sc in s.scopes if sc.kind == kind))

    def under(self, prefix: str) -> Trace:
        """The steps recorded under ``prefix`` as a trace of their own, names and scopes relative
        to it (``trf_blocks[1].att.attn_weights`` -> ``attn_weights``); the tensors are shared."""
        head = prefix + "."
        steps = []
        for s in self.steps:
            if s.prefix == prefix or s.prefix.startswith(head):
                inner = s.prefix[len(head):] if s.prefix.startswith(head) else ""
                names = [sc.name for sc in s.scopes]
                outer = next((k for k in range(len(names) + 1) if ".".join(names[:k]) == prefix), 0)
                steps.append(replace(s, name=s.name[len(head):], prefix=inner, scopes=s.scopes[outer:]))
        if not steps:
            raise KeyError(f"no steps under {prefix!r}; prefixes: {', '.join(self.prefixes())}")
        return Trace(steps)


def record(trace: Trace | None, name: str, tensor: torch.Tensor, code: str | None = None, note: str | None = None,
           *, depth: int = 1, arg: int = 2, **kw: object) -> None:
    """``trace.record(...)`` when tracing, nothing otherwise (keeps forwards one-liners; a ``None`` tensor, such
    as no mask, is not recorded). The code line is the caller's (``depth`` frames up), whose call holds the
    tensor as positional argument ``arg``."""
    if trace is not None and tensor is not None:
        trace.record(name, tensor, code, note, depth=depth + 1, arg=arg, **kw)  # type: ignore[arg-type]


def scope(trace: Trace | None, kind: str, *index: int, name: str | None = None):
    """``trace.scope(kind, *index)`` when tracing, a no-op context otherwise: ``with scope(trace, "tile", i, j):``."""
    return nullcontext() if trace is None else trace.scope(kind, *index, name=name)


# --- The code line of a step, read from the source -------------------------------------------------------

@functools.cache
def _module_tree(filename: str) -> tuple[ast.Module, tuple[str, ...]] | None:
    lines = tuple(linecache.getlines(filename))
    if not lines:
        return None
    return ast.parse("".join(lines)), lines


def _writes(stmt: ast.stmt, var: str) -> bool:
    """Whether ``stmt`` assigns ``var`` (``var = ...``, ``var += ...``) or changes it in place (``var.x_(...)``)."""
    if isinstance(stmt, ast.Assign):
        return any(isinstance(n, ast.Name) and n.id == var for t in stmt.targets for n in ast.walk(t))
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == var
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        return (isinstance(f, ast.Attribute) and f.attr.endswith("_") and not f.attr.startswith("_")
                and isinstance(f.value, ast.Name) and f.value.id == var)
    return False


def _reads(node: ast.AST) -> tuple[str, ...]:
    """The names ``node`` reads, in source order."""
    names = [n for n in ast.walk(node) if isinstance(n, ast.Name)]
    return tuple(n.id for n in sorted(names, key=lambda n: (n.lineno, n.col_offset)))


def _flow(stmt: ast.stmt, var: str) -> Flow:
    """What statement ``stmt``, which writes ``var``, reads."""
    read: ast.AST = stmt
    if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
        read = stmt.value  # not its targets
    parts = frozenset(ast.dump(n) for n in ast.walk(read) if isinstance(n, ast.expr))
    return Flow(var, _reads(read), parts=parts)


def source_of(filename: str, lineno: int, arg: int = 2) -> tuple[str, tuple[str, int] | None]:
    """(code, (file, line)) of the step recorded by the call on ``filename:lineno``: the nearest statement
    above it, in the same function, that writes the variable passed as the call's positional argument
    ``arg`` (``record(trace, "attn_scores", attn_scores)`` -> ``attn_scores = queries @ keys.transpose(2, 3)``).
    An expression passed instead of a variable is its own code. Cached: a forward pays this once per line."""
    return _source(filename, lineno, arg)[:2]


@functools.cache
def _source(filename: str, lineno: int, arg: int = 2) -> tuple[str, tuple[str, int] | None, Flow]:
    """:func:`source_of` and the :class:`Flow` of the statement it found."""
    parsed = _module_tree(filename)
    if parsed is None:
        return "", None, Flow()
    tree, lines = parsed
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
             and n.lineno <= lineno <= (n.end_lineno or n.lineno)]
    if not funcs:
        return "", None, Flow()
    func = max(funcs, key=lambda n: n.lineno)  # the innermost
    call = next((n for n in ast.walk(func) if isinstance(n, ast.Call) and n.lineno == lineno and len(n.args) > arg),
                None)
    if call is None:
        return "", None, Flow()
    target = call.args[arg]
    if not isinstance(target, ast.Name):
        flow = Flow(reads=_reads(target), expr=ast.dump(target))
        return ast.get_source_segment("".join(lines), target) or "", (filename, lineno), flow
    writers = [s for s in ast.walk(func) if isinstance(s, ast.stmt) and s.lineno < lineno and _writes(s, target.id)]
    if not writers:
        return target.id, None, Flow(reads=(target.id,))
    stmt = max(writers, key=lambda s: s.lineno)
    text = textwrap.dedent("".join(lines[stmt.lineno - 1:stmt.end_lineno or stmt.lineno])).strip()
    return text, (filename, stmt.lineno), _flow(stmt, target.id)


def function_at(origin: tuple[str, int]) -> tuple[str, int, list[str]] | None:
    """(qualified name, first line, source lines) of the innermost function whose source holds the line at
    ``origin`` (a step's): Shape flow shows that source with the step's line marked."""
    filename, line = origin
    parsed = _module_tree(filename)
    if parsed is None:
        return None
    tree, lines = parsed
    found = None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                    source = [t.rstrip("\n") for t in lines[start - 1:child.end_lineno]]
                    found = (f"{prefix}{child.name}", start, source)
                    visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found
