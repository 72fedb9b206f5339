package advantage

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can branch with errors.Is; errors about a particular field
// are also a *FieldError, which says where (errors.As).
var (
	// ErrUnknownName: Config.Estimator names no estimator of the
	// registry.
	ErrUnknownName = errors.New("unknown name")
	// ErrEmptyBatch: the batch has no trajectories.
	ErrEmptyBatch = errors.New("empty batch")
	// ErrLengthMismatch: a per-trajectory slice or a per-token row does not
	// have the length that Mask gives it.
	ErrLengthMismatch = errors.New("length mismatch")
	// ErrNonFinite: a value is NaN or ±Inf, or a result overflows float32.
	ErrNonFinite = errors.New("value is NaN or infinite")
	// ErrMissingInput: an input that the chosen estimator needs is nil.
	ErrMissingInput = errors.New("missing input")
	// ErrInvalidValue: a value is finite but outside its domain (a mask
	// entry other than 0 or 1, an empty group id, γ outside [0, 1], ...).
	ErrInvalidValue = errors.New("invalid value")
	// ErrDegenerate: the estimator is undefined on this batch (whitening
	// over fewer than two tokens, a pass@k group of one, an OPO group with
	// no response tokens).
	ErrDegenerate = errors.New("estimator undefined on this batch")
	// ErrDuplicateName: Register was given a name already registered.
	ErrDuplicateName = errors.New("name already registered")
	// ErrInvalidOutput: an Estimator returned rows whose shape differs from
	// Mask, or non-finite values.
	ErrInvalidOutput = errors.New("estimator returned invalid output")
)

// FieldError reports a bad value and where it is: the field of Input,
// Config or Output, and the trajectory (Row) and token (Col) indices where
// they apply (-1 where they do not). Err is one of the sentinels above.
type FieldError struct {
	Field string // e.g. "Scores", "Mask", "Config.Gamma", "Advantages"
	Row   int    // trajectory index, or -1
	Col   int    // token index within the row, or -1
	Err   error  // the sentinel this error wraps
	Msg   string // what exactly is wrong, for people
}

// Error formats the error as "Field[row][col]: sentinel: detail"; the
// functions that return it add the package and estimator names in front.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Field)
	if e.Row >= 0 {
		fmt.Fprintf(&b, "[%d]", e.Row)
	}
	if e.Col >= 0 {
		fmt.Fprintf(&b, "[%d]", e.Col)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Unwrap returns the sentinel, for errors.Is.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErr builds a *FieldError; row and col are -1 where they do not apply.
func fieldErr(field string, row, col int, sentinel error, format string, args ...any) error {
	return &FieldError{Field: field, Row: row, Col: col, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}
