"""What "calibrated on the casebook" accepts: over-confidence beyond the tolerance never,
under-confidence up to the allowance below the least accuracy a bucket's cases make
plausible (a small bucket of all-right answers does not prove it is always right)."""

from __future__ import annotations

from hangdoc.casebook_eval import CASEBOOK_UNDERCONFIDENCE, SplitScore, _wilson_low


class _Buckets(SplitScore):
    def __init__(self, rows: list[tuple[str, int, float, float]]) -> None:
        super().__init__("test")
        self.rows = rows

    def calibration(self) -> list[tuple[str, int, float, float]]:
        return self.rows


def test_wilson_lower_ends() -> None:
    assert abs(_wilson_low(1.0, 11) - 0.741) < 0.001
    assert abs(_wilson_low(0.5, 10) - 0.237) < 0.001
    assert 0.87 < _wilson_low(0.9, 1000) < 0.9


def test_a_small_all_right_bucket_may_state_less_than_a_large_one() -> None:
    assert _Buckets([("60%–80%", 11, 0.71, 1.0)]).calibrated()
    # 400 right of 400 make at least 99 % plausible: a stated share further below that than
    # the allowance (CASEBOOK_UNDERCONFIDENCE) is not calibrated, one within it is
    floor_400 = _wilson_low(1.0, 400) - CASEBOOK_UNDERCONFIDENCE
    assert not _Buckets([("60%–80%", 400, floor_400 - 0.01, 1.0)]).calibrated()
    assert _Buckets([("60%–80%", 400, floor_400 + 0.01, 1.0)]).calibrated()
    floor_11 = _wilson_low(1.0, 11) - CASEBOOK_UNDERCONFIDENCE  # 0.74 - the allowance
    assert not _Buckets([("40%–60%", 11, floor_11 - 0.01, 1.0)]).calibrated()


def test_over_confidence_beyond_the_tolerance_is_never_calibrated() -> None:
    assert not _Buckets([("80%–100%", 11, 0.95, 0.7)]).calibrated()
    assert _Buckets([("80%–100%", 11, 0.95, 0.85)]).calibrated()


def test_buckets_below_the_minimum_are_not_judged() -> None:
    assert _Buckets([("20%–40%", 2, 0.3, 1.0)]).calibrated()
