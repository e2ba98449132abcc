"""A housekeeping report (``housekeeping.run``) as one line per step, for the command line."""

from __future__ import annotations


def housekeeping_summary(report: dict) -> list[tuple[str, str, str]]:
    """One line per step: (step, seconds, what it did)."""
    lines = []
    for step, outcome in report.items():
        if "skipped" in outcome:
            lines.append((step, "", f"skipped: {outcome['skipped']}"))
        else:
            lines.append((step, f"{outcome['seconds']:.1f}", _STEP_SUMMARIES[step](outcome["result"])))
    return lines


def _compaction_done(result: list[dict]) -> str:
    return "; ".join(f"{r['table']} {r['status']}" + (f" ({r['rows_written']} rows)" if "rows_written" in r else "")
                     for r in result) or "no change streams"


def _tombstones_done(result: list[dict]) -> str:
    return f"{sum(r['expired'] for r in result)} tombstones expired in {len(result)} tables"


def _archive_done(result: dict) -> str:
    kept = ", ".join(f"{n} {why}" for why, n in sorted(result["kept"].items()))
    return f"{result['archived']} landing files archived" + (f"; kept: {kept}" if kept else "")


def _acks_done(result: list[dict]) -> str:
    return "; ".join(f"{a['source']}: acknowledged through {a['applied_through']['end_ts']}" for a in result) \
        or "no shadow source to acknowledge"


def _optimize_done(result: list[dict]) -> str:
    compacted = [r["optimize"] for r in result if isinstance(r["optimize"], dict)]
    return (f"{len(compacted)} tables optimized ({sum(o['files_removed'] for o in compacted)} files into "
            f"{sum(o['files_added'] for o in compacted)}), {len(result) - len(compacted)} left as read by a stream; "
            f"{sum(r['vacuumed_files'] for r in result)} files vacuumed")


_STEP_SUMMARIES = {"compaction": _compaction_done, "tombstones": _tombstones_done, "archive": _archive_done,
                   "acks": _acks_done, "optimize": _optimize_done}
