"""ISO 8601 durations (``P1DT2H``) and a compact human format (``1d 2h``)."""

import datetime
import re

from datewise.errors import ParseError

_DURATION = re.compile(
    r"P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:[.,]\d+)?)S)?)?$"
)

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def parse_duration(text):
    """Parse an ISO 8601 duration without years or months into a ``timedelta``."""
    text = text.strip()
    match = _DURATION.match(text)
    if not match or text in ("P", "PT") or text.endswith("T"):
        raise ParseError(text, "not an ISO 8601 duration")
    fields = {k: float(v.replace(",", ".")) for k, v in match.groupdict().items() if v}
    return datetime.timedelta(**fields)


def format_duration(delta):
    """Format a ``timedelta`` as ``'1d 2h 3m 4s'``, omitting zero units; zero is ``'0s'``."""
    total = int(delta.seconds)
    sign = "-" if total < 0 else ""
    total = abs(total)
    parts = []
    for suffix, size in _UNITS:
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{suffix}")
    return sign + (" ".join(parts) or "0s")
