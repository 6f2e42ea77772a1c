"""Metrics as ratios against floors: the printed table and the JSON file."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

COMPARISONS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Metric:
    """`ratio` = value / floor, judged against `target` (e.g. "<= 1.2"); None where nothing was measured.

    `floor_is_lower_bound`: the floor side did not finish within its limit, so `floor` is that
    limit (shown "> floor") and the true ratio lies below `ratio` (shown "< ratio").
    """

    name: str
    value: float | None
    floor: float | None
    target: str | None
    unit: str
    note: str = ""
    floor_is_lower_bound: bool = False

    @property
    def ratio(self) -> float | None:
        if self.value is None or self.floor is None or self.floor == 0:
            return None
        return self.value / self.floor

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "skipped"
        if self.target is None:
            return "info"
        sign, limit = self.target.split()
        met = COMPARISONS[sign](self.ratio, float(limit))
        if not self.floor_is_lower_bound:
            return "ok" if met else "MISS"
        # The true ratio is below the bound: the bound can prove "<=" met or ">=" missed, nothing more.
        if sign == "<=":
            return "ok" if met else "open"
        return "open" if met else "MISS"

    @property
    def bounds(self) -> tuple[str, str]:
        """The signs shown before the floor and the ratio: ">" and "<" when the floor is a lower bound."""
        return (">", "<") if self.floor_is_lower_bound and self.ratio is not None else ("", "")


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or 0.01 <= abs(value) < 100_000:
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{value:.2e}"


def _bounded(sign: str, value: float | None) -> str:
    return f"{sign} {_number(value)}" if sign else _number(value)


def _cells(m: Metric) -> tuple[str, ...]:
    floor_sign, ratio_sign = m.bounds
    return (
        m.name,
        _number(m.value),
        _bounded(floor_sign, m.floor),
        m.unit,
        _bounded(ratio_sign, m.ratio),
        m.target or "-",
        m.verdict,
    )


def table(metrics: list[Metric]) -> str:
    header = ("metric", "value", "floor", "unit", "ratio", "target", "verdict")
    rows = [header] + [_cells(m) for m in metrics]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    notes = [f"  {m.name}: {m.note}" for m in metrics if m.note]
    return "\n".join(lines + (["", "notes:", *notes] if notes else []))


def markdown(metrics: list[Metric]) -> str:
    lines = ["| metric | value | floor | unit | ratio | target | verdict |", "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cells(m)) + " |" for m in metrics]
    return "\n".join(lines)


def publish(metrics: list[Metric], context: Mapping[str, object], json_path: Path | None) -> None:
    """Print the table and the run's context; write the JSON too when asked."""
    print(table(metrics))
    print(f"\n{context}")
    if json_path is not None:
        write_json(json_path, metrics, context)


def _json_metric(m: Metric) -> dict[str, object]:
    floor_sign, ratio_sign = m.bounds
    return {
        "value": m.value,
        "floor": m.floor,
        "ratio": m.ratio,
        **({"floor_bound": floor_sign, "ratio_bound": ratio_sign} if floor_sign else {}),
        "target": m.target,
        "unit": m.unit,
        "verdict": m.verdict,
        **({"note": m.note} if m.note else {}),
    }


def write_json(path: Path, metrics: list[Metric], context: Mapping[str, object]) -> None:
    data = {"context": context, "metrics": {m.name: _json_metric(m) for m in metrics}}
    path.write_text(json.dumps(data, indent=2) + "\n")
