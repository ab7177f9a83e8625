"""The forecast in lines for people: what `crondepot forecast` prints and the console shows.

"09:00:00: 480,112 runs on `sms-gateway` at 450/s, drained by 09:17:47, 0 past deadline".
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

from crondepot.forecast.drain import Wave
from crondepot.forecast.report import Forecast, LimitForecast

__all__ = ["lines", "wave_line"]

# Waves listed per limit; the rest are summed in one line.
LISTED_WAVES = 20


def _at(moment: datetime, zone: tzinfo, since: datetime | None = None) -> str:
    local = moment.astimezone(zone)
    if since is not None and since.astimezone(zone).date() == local.date():
        return f"{local:%H:%M:%S}"
    return f"{local:%Y-%m-%d %H:%M:%S}"


def _by(moment: datetime) -> datetime:
    """A send time as "drained by": rounded up to the whole second."""
    whole = moment.replace(microsecond=0)
    return whole if whole == moment else whole + timedelta(seconds=1)


def _rate(per_second: float) -> str:
    return f"{per_second:g}/s"


def wave_line(lf: LimitForecast, wave: Wave, zone: tzinfo) -> str:
    head = f"{_at(wave.start, zone)}: {wave.runs:,} runs on `{lf.name}`"
    if wave.drained_at is None:
        tail = f"held ({lf.held} hold): none sent while it lasts"
    else:
        assert lf.bucket is not None
        tail = (f"at {_rate(lf.bucket.rate_per_second)}, drained by "
                f"{_at(_by(wave.drained_at), zone, wave.start)}")
    passes = [f"{n:,} would pass their {_at(d, zone, wave.start)} deadline"
              for d, n in sorted(wave.deadlines.items())]
    return f"{head} {tail}, " + ("; ".join(passes) if passes else "0 past deadline")


def _limit_lines(lf: LimitForecast, zone: tzinfo) -> list[str]:
    if lf.name is None:
        busiest = max(lf.per_minute.items(), key=lambda kv: (kv[1], -kv[0].timestamp()),
                      default=None)
        peak = (f"; busiest minute {_at(busiest[0], zone)} ({busiest[1]:,} runs)"
                if busiest else "")
        return [f"no rate limit: {lf.runs:,} runs, {lf.queued_now:,} queued now{peak} "
                "(limited by workers, not modelled)"]
    if lf.bucket is None:
        return [f"`{lf.name}`: {lf.runs:,} runs, {lf.queued_now:,} queued now: not a rate "
                "limit this tenant may use; these runs fail for good"]
    shared = ", shared: other tenants' runs not counted" if not lf.bucket.owned else ""
    out = [f"`{lf.name}` {_rate(lf.bucket.rate_per_second)}, burst {lf.bucket.burst}"
           f"{shared}: {lf.runs:,} runs, {lf.queued_now:,} queued now"
           + (f", held ({lf.held} hold)" if lf.held else "")]
    waited = [w for w in lf.waves if w.waited or w.past_deadline]
    out += ["  " + wave_line(lf, w, zone) for w in waited[:LISTED_WAVES]]
    if len(waited) > LISTED_WAVES:
        rest = waited[LISTED_WAVES:]
        out.append(f"  … {len(rest):,} more waves that wait ({sum(w.runs for w in rest):,} "
                   "runs)")
    prompt = [w for w in lf.waves if not (w.waited or w.past_deadline)]
    if prompt:
        out.append(f"  {len(prompt):,} waves sent on arrival "
                   f"({sum(w.runs for w in prompt):,} runs)")
    return out


def lines(result: Forecast, zone: tzinfo) -> list[str]:
    out = [f"forecast {_at(result.now, zone)} .. {_at(result.until, zone)} "
           f"({result.hours} h): {result.runs:,} runs of {result.jobs:,} jobs "
           f"({result.groups:,} distinct timetables), "
           f"{sum(lf.queued_now for lf in result.limits):,} queued now; drained oldest first, "
           f"earliest deadline first within a limit ({result.seconds:.2f} s)"]
    for lf in result.limits:
        out += _limit_lines(lf, zone)
    if result.skipped:
        out.append("written skipped: " + ", ".join(
            f"{reason} {n:,}" for reason, n in sorted(result.skipped.items())))
    if result.unreadable_jobs:
        out.append(f"{result.unreadable_jobs:,} jobs have a timetable that no longer reads: "
                   "not counted")
    return out
