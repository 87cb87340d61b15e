"""Two sets of results compared, as ``cnnbench compare`` and :func:`cnnbench.api.compare_results` do
(:func:`compare_sets`).

With ``by``, one set is split into its two sides by that field's values
(:func:`~cnnbench.compare.build.split_records`); without, the two sets are the baseline and
the candidate. Their results are matched and each pair tested
(:func:`~cnnbench.compare.build.compare_records`); a comparison in which nothing matches
raises :class:`NoMatches`, which says the fields the results differ in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cnnbench.compare.build import (
    BASELINE,
    CANDIDATE,
    CompareError,
    CompareOptions,
    CompareResult,
    Side,
    compare_records,
    split_records,
)

CLI_FLAGS = ("--ignore", "--across-machines")
"""How :class:`NoMatches` names the options that widen the matching, unless told otherwise."""


class NoMatches(CompareError):
    """No result of the baseline matches one of the candidate (``result``: the empty comparison)."""

    def __init__(self, result: CompareResult, flags: tuple[str, str] = CLI_FLAGS) -> None:
        self.result = result
        why = ", ".join(f"{k.rsplit('.', 1)[-1]} ({n})" for k, n in list(result.why_unmatched.items())[:5])
        super().__init__("no result of the baseline matches one of the candidate"
                         + (f"; they differ in: {why} (see {flags[0]}, {flags[1]})" if why else ""))


def compare_sets(baseline: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]] | None = None,
                 options: CompareOptions | None = None, *, by: str | None = None,
                 baseline_value: str | None = None, candidate_value: str | None = None,
                 labels: tuple[str, str] = (BASELINE, CANDIDATE), flags: tuple[str, str] = CLI_FLAGS,
                 ) -> CompareResult:
    """The baseline's and the candidate's results matched and each pair tested; with ``by``,
    ``baseline`` alone split by that field (``baseline_value``/``candidate_value`` name the
    sides' values). ``labels`` name two sets' sides; ``flags`` are the names :class:`NoMatches`
    gives the options that widen the matching. Raises :class:`CompareError`."""
    opts = options or CompareOptions()
    if by is not None:
        if candidate is not None:
            raise ValueError("compare_sets: with by, give one set of results")
        base, cand, split = split_records(baseline, by, baseline_value, candidate_value, opts.where)
        result = compare_records(base, cand, opts, split=split)
    else:
        if candidate is None:
            raise ValueError("compare_sets: give the candidate's results, or by")
        result = compare_records(Side(labels[0], list(baseline)), Side(labels[1], list(candidate)), opts)
    if not result.pairs and not result.bandwidth:
        raise NoMatches(result, flags)
    return result


__all__ = ["CLI_FLAGS", "NoMatches", "compare_sets"]
