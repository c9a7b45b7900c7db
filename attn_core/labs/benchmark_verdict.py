"""What a benchmark run's timings say: pure functions of the measured milliseconds (no torch, no Streamlit).

A verdict is read from the repeats, not from one number each: the benchmark times every implementation once per
round, in rotating order (``benchmark.run``), so round *i* of two implementations ran under the same load. Their
per-round ratios give a median ratio and a noise band (its quartiles). A difference is called only when the whole
band is on one side of 1 and the median differs by at least :data:`MIN_DIFFERENCE`; otherwise it is "within noise".
The page's sentences (which is fastest, and whether each reason the page gives for a speed-up showed in this run) are
written from these comparisons, never assumed.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from attn_core.messages import N_, Msg, Problem

MIN_DIFFERENCE = 0.05  # medians closer than 5% are "the same" whatever the spread: nobody should act on less
NOISY_IQR = 0.25  # a time whose middle half of repeats spans more than 25% of its median is too noisy to trust
NOISY_SPREAD = 0.5  # rows without quartiles: (slowest - fastest) / median above this is too noisy


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile); one value is all three."""
    if not values:
        raise Problem("no timings: measure at least one repeat")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def relative_noise(times: Sequence[float]) -> float:
    """The interquartile range of the repeats as a fraction of their median (0.1: the middle half within 10%)."""
    q1, med, q3 = quartiles(times)
    return (q3 - q1) / med if med else 0.0


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b``: the median per-round ratio a/b and its noise band (below 1: ``a`` is faster)."""

    a: str
    b: str
    ms_a: float
    ms_b: float
    ratio: float
    low: float
    high: float
    outcome: str  # "faster", "slower" (a relative to b) or "same" (within noise)

    def sentence(self) -> str:
        """One sentence from the numbers: which took less time, by how much, or that the difference is noise."""
        return str(self.sentence_msg())

    def sentence_msg(self) -> Msg:
        """:meth:`sentence` as a message the pages translate."""
        numbers = {"a": self.a, "b": self.b, "ms_a": self.ms_a, "ms_b": self.ms_b, "low": self.low, "high": self.high}
        if self.outcome == "same":
            return Msg("{a} and {b} took the same time within noise ({ms_a:.3g} ms vs {ms_b:.3g} ms; per-round ratio "
                       "{low:.2f}–{high:.2f}).", **numbers)
        if self.outcome == "faster":
            return Msg("{a} was {factor:.2f}× faster than {b} ({ms_a:.3g} ms vs {ms_b:.3g} ms; per-round ratio "
                       "{low:.2f}–{high:.2f}).", factor=1 / self.ratio, **numbers)
        return Msg("{a} was {factor:.2f}× slower than {b} ({ms_a:.3g} ms vs {ms_b:.3g} ms; per-round ratio "
                   "{low:.2f}–{high:.2f}).", factor=self.ratio, **numbers)


def compare(a: str, a_times: Sequence[float], b: str, b_times: Sequence[float]) -> Comparison:
    """Compare two implementations' repeats. Equal counts are taken as paired rounds (same load); otherwise the
    band is built from each one's quartiles (wider)."""
    qa, qb = quartiles(a_times), quartiles(b_times)
    if len(a_times) == len(b_times) and all(t > 0 for t in b_times):
        low, ratio, high = quartiles([x / y for x, y in zip(a_times, b_times)])
    else:
        ratio, low, high = qa[1] / qb[1], qa[0] / qb[2], qa[2] / qb[0]
    if high < 1 and ratio < 1 - MIN_DIFFERENCE:
        outcome = "faster"
    elif low > 1 and ratio > 1 + MIN_DIFFERENCE:
        outcome = "slower"
    else:
        outcome = "same"
    return Comparison(a, b, qa[1], qb[1], ratio, low, high, outcome)


@dataclass(frozen=True)
class Verdict:
    """One size and pass: the fastest, those within noise of it, and the timings too noisy to trust."""

    fastest: str
    ties: tuple[str, ...]  # within noise of the fastest
    noisy: tuple[str, ...]  # middle half of the repeats wider than NOISY_IQR, or fewer than 3 repeats
    sentences: tuple[Msg, ...]  # each a whole sentence; pages translate each and join them

    @property
    def text(self) -> str:
        return " ".join(map(str, self.sentences))


def verdict(times: Mapping[str, Sequence[float]]) -> Verdict:
    """Which implementation was fastest, and which are indistinguishable from it, from each one's repeats."""
    if not times:
        raise Problem("no implementations were measured")
    medians = {name: quartiles(ts)[1] for name, ts in times.items()}
    fastest = min(medians, key=medians.get)
    ties = tuple(n for n in sorted(medians, key=medians.get) if n != fastest
                 and compare(n, times[n], fastest, times[fastest]).outcome == "same")
    noisy = tuple(n for n, ts in times.items() if len(ts) < 3 or relative_noise(ts) > NOISY_IQR)
    sentences = [Msg("Fastest: {fastest} ({ms:.3g} ms).", fastest=fastest, ms=medians[fastest])]
    if ties:
        sentences.append(Msg("Within noise of it: {ties}.", ties=", ".join(ties)))
    if noisy:
        sentences.append(Msg("Too noisy to rank: {noisy} (their repeats varied by more than {iqr:.0%} of the median, "
                             "or fewer than 3 fit the budget).", noisy=", ".join(noisy), iqr=NOISY_IQR))
    return Verdict(fastest, ties, noisy, tuple(sentences))


# Each reason the page gives for a speed-up, as (the faster one, the slower one, the reason).
REASONS = (
    ("MultiHeadAttention (explicit)", "MultiHeadAttentionWrapper",
     N_("**One matmul for all heads.** The wrapper runs one small `CausalAttention` per head, one after the other; "
        "`MultiHeadAttention` projects all heads with one big matmul and computes every head's scores with one "
        "batched matmul (`queries @ keys.transpose(2, 3)`).")),
    ("MultiHeadAttention (efficient)", "MultiHeadAttention (explicit)",
     N_("**Fused kernels.** `scaled_dot_product_attention` does scaling, masking, softmax and the weighted sum in "
        "one kernel (FlashAttention or memory-efficient attention on GPUs), instead of one pass over memory per "
        "step.")),
)


def explain(groups: Mapping[str, Mapping[str, Sequence[float]]]) -> list[str]:
    """The reasons a faster implementation *can* be faster, each followed by what this run measured.

    ``groups`` maps a label (a size and pass) to each implementation's repeats. A reason whose pair was not
    measured is left out; one the run contradicts says so, and one within noise says that the saving did not show."""
    return [" ".join(map(str, paragraph)) for paragraph in explain_msg(groups)]


def explain_msg(groups: Mapping[str, Mapping[str, Sequence[float]]]) -> list[list[Msg]]:
    """:func:`explain` as messages: one list of whole sentences per reason, for the page to translate and join."""
    out = []
    for fast, slow, reason in REASONS:
        found = []
        for label, times in groups.items():
            if fast in times and slow in times:
                found.append((label, compare(fast, times[fast], slow, times[slow])))
        if not found:
            continue
        lines = [Msg(reason), Msg("**Measured in this run:**")]
        for label, c in found:
            if c.outcome == "faster":
                lines.append(Msg("{label}: as expected, {comparison}", label=label, comparison=c.sentence_msg()))
            elif c.outcome == "same":
                lines.append(Msg("{label}: no measurable gain here. {comparison} At this size the saving is smaller "
                                 "than the machine's noise.", label=label, comparison=c.sentence_msg()))
            else:
                lines.append(Msg("{label}: **the opposite of the reason above.** {comparison} At this size the "
                                 "overhead it removes is not what the time is spent on.", label=label,
                                 comparison=c.sentence_msg()))
        out.append(lines)
    return out


def noisy_rows(rows: Iterable[dict]) -> list[dict]:
    """Result rows (``Result.row()``) too noisy to trust: fewer than 3 repeats, or the middle half of the repeats
    wider than :data:`NOISY_IQR` of the median (rows without quartiles: the whole range above :data:`NOISY_SPREAD`).
    The quartiles ignore one slow repeat, which on an idle machine made every run "too noisy"."""
    out = []
    for r in rows:
        ms = r.get("ms")
        q1, q3, lo, hi = (r.get(k) for k in ("ms_q1", "ms_q3", "ms_min", "ms_max"))
        if r.get("reps", 0) < 3:
            out.append(r)
        elif q1 is not None and q3 is not None and ms:
            if (q3 - q1) / ms > NOISY_IQR:
                out.append(r)
        elif lo is not None and hi is not None and ms and (hi - lo) / ms > NOISY_SPREAD:
            out.append(r)
    return out


def describe_scaling(rows: Iterable[dict], implementation: str = "MultiHeadAttention (explicit)") -> str:
    """One or two sentences, written from the measured time-vs-T rows: how ``implementation``'s ratio
    to raw SDPA changed from the smallest to the largest T, and whether its times grew steadily."""
    return " ".join(map(str, describe_scaling_msg(rows, implementation)))


def describe_scaling_msg(rows: Iterable[dict], implementation: str = "MultiHeadAttention (explicit)") -> list[Msg]:
    """:func:`describe_scaling` as whole sentences the page translates."""
    mine = sorted((r for r in rows if r["implementation"] == implementation and r.get("ratio_to_sdpa")),
                  key=lambda r: r["num_tokens"])
    if len(mine) < 2:
        return [Msg("Too few sizes were measured for {implementation} to say how it scales.",
                    implementation=implementation)]
    first, last = mine[0], mine[-1]
    a, b = first["ratio_to_sdpa"], last["ratio_to_sdpa"]
    span = {"implementation": implementation, "a": a, "t_first": first["num_tokens"], "b": b,
            "t_last": last["num_tokens"]}
    if b > 1.15 * a:
        text = [Msg("In this run {implementation} took {a:.2f}× raw SDPA at T = {t_first} and {b:.2f}× at "
                    "T = {t_last}: it falls further behind as T grows.", **span)]
    elif b < a / 1.15:
        text = [Msg("In this run {implementation} took {a:.2f}× raw SDPA at T = {t_first} and {b:.2f}× at "
                    "T = {t_last}: the gap shrank, unlike the expected T² trend.", **span)]
    else:
        text = [Msg("In this run {implementation} took {a:.2f}× raw SDPA at T = {t_first} and {b:.2f}× at "
                    "T = {t_last}: no clear trend.", **span)]
    times = [r["ms"] for r in mine]
    if any(t2 < t1 for t1, t2 in zip(times, times[1:])):
        text.append(Msg("Its time did not grow steadily with T (a longer input ran faster), so the machine was busy "
                        "during this run: run it again before drawing conclusions."))
    return text
