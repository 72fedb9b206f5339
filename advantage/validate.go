package advantage

import (
	"fmt"
	"math"
)

// Validate checks the shape and the values of every field that is set: Mask
// non-empty with entries 0 or 1; per-trajectory fields of length len(Mask);
// per-token rows of the length of the matching Mask row; turns that are
// ordered spans of their rows; all values finite;
// group ids non-empty; Scores or TokenRewards present. It does not check
// that the fields a particular estimator needs are set: the estimator does.
// Compute and Registry.Compute call it before every estimator.
func (in Input) Validate() error {
	if err := in.validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	return nil
}

func (in Input) validate() error {
	b := len(in.Mask)
	if b == 0 {
		return fieldErr("Mask", -1, -1, ErrEmptyBatch, "no trajectories (Mask has no rows)")
	}
	for i, row := range in.Mask {
		if !binaryRow(row) {
			return maskErr(i, row)
		}
	}
	if in.Scores == nil && in.TokenRewards == nil {
		return fieldErr("Scores", -1, -1, ErrMissingInput, "set Scores, TokenRewards or both")
	}
	if err := checkPerTrajectory("Scores", in.Scores, b); err != nil {
		return err
	}
	if err := checkPerTrajectory("BaselineScores", in.BaselineScores, b); err != nil {
		return err
	}
	if in.Groups != nil {
		if len(in.Groups) != b {
			return fieldErr("Groups", -1, -1, ErrLengthMismatch, "length %d, Mask has %d rows", len(in.Groups), b)
		}
		for i, g := range in.Groups {
			if g == "" {
				// An unset id would silently pool unrelated prompts.
				return fieldErr("Groups", i, -1, ErrInvalidValue, "empty group id")
			}
		}
	}
	if err := checkPerToken("TokenRewards", in.TokenRewards, in.Mask); err != nil {
		return err
	}
	if err := checkTurns(in.Turns, in.Mask); err != nil {
		return err
	}
	return checkPerToken("Values", in.Values, in.Mask)
}

// checkTurns checks Turns, if set: one list per row, each turn a span of
// its row at or after the previous turn's end, with a finite reward.
// Errors name the row and the turn (as the Col of the *FieldError).
func checkTurns(turns [][]Turn, mask [][]float32) error {
	if turns == nil {
		return nil
	}
	if len(turns) != len(mask) {
		return fieldErr("Turns", -1, -1, ErrLengthMismatch, "%d rows, Mask has %d", len(turns), len(mask))
	}
	for i, row := range turns {
		prev := 0
		for k, tu := range row {
			switch {
			case tu.Start < prev || tu.End < tu.Start || tu.End > len(mask[i]):
				return fieldErr("Turns", i, k, ErrInvalidValue, "span [%d, %d) is not within [%d, %d] after the previous turn", tu.Start, tu.End, prev, len(mask[i]))
			case math.IsNaN(tu.Reward) || math.IsInf(tu.Reward, 0):
				return fieldErr("Turns", i, k, ErrNonFinite, "reward %v", tu.Reward)
			}
			prev = tu.End
		}
	}
	return nil
}

// checkPerTrajectory checks a per-trajectory field, if set.
func checkPerTrajectory(field string, xs []float64, b int) error {
	if xs == nil {
		return nil
	}
	if len(xs) != b {
		return fieldErr(field, -1, -1, ErrLengthMismatch, "length %d, Mask has %d rows", len(xs), b)
	}
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fieldErr(field, i, -1, ErrNonFinite, "%v", x)
		}
	}
	return nil
}

// checkPerToken checks a per-token field, if set.
func checkPerToken(field string, rows [][]float32, mask [][]float32) error {
	if rows == nil {
		return nil
	}
	if len(rows) != len(mask) {
		return fieldErr(field, -1, -1, ErrLengthMismatch, "%d rows, Mask has %d", len(rows), len(mask))
	}
	for i, row := range rows {
		if len(row) != len(mask[i]) {
			return fieldErr(field, i, -1, ErrLengthMismatch, "%d tokens, Mask row has %d", len(row), len(mask[i]))
		}
		if !finiteRow(row) {
			for t, v := range row {
				if v-v != 0 {
					return fieldErr(field, i, t, ErrNonFinite, "%v", v)
				}
			}
		}
	}
	return nil
}

// binaryRow reports whether every entry is 0 or 1. It is branch-free on the
// common path: m·(m−1) is ±0 exactly when m is 0, −0 or 1, and non-zero
// (or NaN) for every other float32, including NaN, ±Inf and subnormals, so
// OR-ing the magnitude bits stays 0 only for a valid row.
func binaryRow(row []float32) bool {
	var acc uint32
	for _, m := range row {
		acc |= math.Float32bits(m*(m-1)) & 0x7fffffff
	}
	return acc == 0
}

// maskErr locates and describes the first invalid entry of a mask row.
func maskErr(i int, row []float32) error {
	for t, m := range row {
		switch {
		case m == 0 || m == 1:
		case m-m != 0:
			return fieldErr("Mask", i, t, ErrNonFinite, "%v", m)
		default:
			return fieldErr("Mask", i, t, ErrInvalidValue, "%v is neither 0 nor 1", m)
		}
	}
	return nil
}

// finiteRow reports whether every entry is finite: v−v is +0 for finite v
// and NaN for NaN and ±Inf.
func finiteRow(row []float32) bool {
	var acc uint32
	for _, v := range row {
		acc |= math.Float32bits(v - v)
	}
	return acc == 0
}
