"""Time stamps as logs write them, and how a file's stamps become POSIX seconds.

Most log stamps are incomplete (FORMATS.md §8.7): glog ``E0709 17:05:38.162`` has no
year, a collector's ``18:11:06.680`` has no date, NCCL stamps only its WARN lines, and
error.json carries an epoch. A line's stamp is kept partial while the file is scanned;
once the whole file is seen, :func:`resolve_stamps` fills the year from any fully dated
line of the same file (else from a year the caller assumes, flagged as such), rolls
the year over at a December→January step, and gives every stamp a clock name so that
rules only compare times that share a clock.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangdoc.analyzer.vocabulary import Clock

MONTHS = {
    name: index
    for index, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
        start=1,
    )
}

# Clocks (vocabulary.Clock): "local" = naive wall-clock times read as UTC (consistent
# within a job, not with epochs); "epoch" = true POSIX seconds (error.json). Rules compare
# only equal clocks; "local" times whose year had to be assumed carry "local?" so they are
# not compared with files whose year is known.
CLOCK_LOCAL = Clock.LOCAL
CLOCK_LOCAL_ASSUMED_YEAR = Clock.LOCAL_ASSUMED_YEAR
CLOCK_EPOCH = Clock.EPOCH


@dataclass(frozen=True, slots=True)
class Stamp:
    """A possibly partial time: seconds of the day plus whatever date the line had."""

    seconds: float
    month: int | None = None
    day: int | None = None
    year: int | None = None
    epoch: float | None = None


_HMS = re.compile(r"(\d{1,2}):(\d{2}):(\d{2}(?:[.,]\d+)?)")


def seconds_of_day(hours: str, minutes: str, seconds: str) -> float:
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds.replace(",", "."))


def parse_hms(text: str) -> float | None:
    m = _HMS.search(text)
    if m is None:
        return None
    return seconds_of_day(m.group(1), m.group(2), m.group(3))


def glog_stamp(mmdd: str, hms: str) -> Stamp | None:
    """``709`` / ``0709`` / ``1206`` + ``17:05:38.162555850`` (month may be unpadded)."""
    if len(mmdd) not in (3, 4):
        return None
    month, day = int(mmdd[:-2]), int(mmdd[-2:])
    seconds = parse_hms(hms)
    if seconds is None or not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return Stamp(seconds, month, day)


def dated_stamp(year: str, month: str, day: str, hms: str) -> Stamp | None:
    seconds = parse_hms(hms)
    if seconds is None:
        return None
    m, d = int(month), int(day)
    if not (1 <= m <= 12 and 1 <= d <= 31):
        return None
    return Stamp(seconds, m, d, int(year))


def dated_stamp_of(
    year: str, month: str, day: str, hours: str, minutes: str, seconds: str
) -> Stamp | None:
    """dated_stamp of a time already split (a stamp pattern's own groups): the same
    Stamp, without joining the time and searching it again (a third of a peeling)."""
    m, d = int(month), int(day)
    if not (1 <= m <= 12 and 1 <= d <= 31):
        return None
    return Stamp(seconds_of_day(hours, minutes, seconds), m, d, int(year))


def epoch_stamp(value: float) -> Stamp:
    return Stamp(value % 86400.0, epoch=value)


@dataclass(frozen=True, slots=True)
class Resolved:
    time: float | None
    clock: Clock | None


def resolve_stamps(stamps: Sequence[Stamp | None], assumed_year: int) -> list[Resolved]:
    """POSIX seconds for a file's stamps, given in file order.

    Stamps without a date take the date of the closest earlier dated stamp (else the
    next one); year-less dates take the file's year (the first full date seen, else
    ``assumed_year``), incremented when months step back by more than half a year.
    """
    known_year = next((s.year for s in stamps if s is not None and s.year is not None), None)
    year = known_year if known_year is not None else assumed_year
    clock = CLOCK_LOCAL if known_year is not None else CLOCK_LOCAL_ASSUMED_YEAR
    first_date = next(
        (
            (s.month, s.day)
            for s in stamps
            if s is not None and s.month is not None and s.day is not None
        ),
        None,
    )
    last_date: tuple[int, int] | None = first_date
    last_month: int | None = None
    out: list[Resolved] = []
    for stamp in stamps:
        if stamp is None:
            out.append(Resolved(None, None))
            continue
        if stamp.epoch is not None:
            out.append(Resolved(stamp.epoch, CLOCK_EPOCH))
            continue
        if stamp.year is not None:
            year = stamp.year
        elif stamp.month is not None and last_month is not None and stamp.month < last_month - 6:
            year += 1
        if stamp.month is not None and stamp.day is not None:
            last_date = (stamp.month, stamp.day)
            last_month = stamp.month
        if last_date is None:
            out.append(Resolved(None, None))
            continue
        month, day = last_date
        try:
            base = calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0))
        except (ValueError, OverflowError):
            out.append(Resolved(None, None))
            continue
        out.append(Resolved(base + stamp.seconds, CLOCK_LOCAL if stamp.year else clock))
    return out
