package advantage

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	want := []string{
		"drgrpo", "gae", "gpg", "grpo", "grpo_passk", "opo",
		"reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo",
	}
	assert.Equal(t, want, Names())
	assert.True(t, slices.IsSorted(Names()))
	assert.Equal(t, want, NewRegistry().Names())
	for _, n := range want {
		_, ok := NewRegistry().Lookup(n)
		assert.True(t, ok, n)
	}
	// Names returns a fresh slice each time.
	n := Names()
	n[0] = "x"
	assert.Equal(t, "drgrpo", Names()[0])
}

// constEstimator gives every mask-1 token the advantage c.
func constEstimator(c float32) Estimator {
	return EstimatorFunc(func(in Input, _ Config) (Output, error) {
		out := Output{Advantages: make([][]float32, len(in.Mask)), Returns: make([][]float32, len(in.Mask))}
		for i, row := range in.Mask {
			out.Advantages[i] = make([]float32, len(row))
			out.Returns[i] = make([]float32, len(row))
			for t, m := range row {
				out.Advantages[i][t] = c * m
			}
		}
		return out, nil
	})
}

func TestRegistryRegisterAndCompute(t *testing.T) {
	r := NewRegistry()
	require.NoError(t, r.Register("const", constEstimator(2)))
	assert.Contains(t, r.Names(), "const")

	out, err := r.Compute("const", fullBatch(), Config{})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{2, 2}, {2, 0, 2}, {2}}, out.Advantages)

	// Built-ins still work through the registry and match Compute.
	viaReg, err := r.Compute(GRPO, fullBatch(), Config{})
	require.NoError(t, err)
	direct, err := Compute(GRPO, fullBatch(), Config{})
	require.NoError(t, err)
	assert.Equal(t, direct, viaReg)

	// Registries are independent: another default registry lacks "const".
	_, err = NewRegistry().Compute("const", fullBatch(), Config{})
	assert.ErrorIs(t, err, ErrUnknownEstimator)
}

func TestRegistryRegisterErrors(t *testing.T) {
	r := NewRegistry()
	assert.ErrorIs(t, r.Register(GRPO, constEstimator(1)), ErrDuplicateName)
	assert.ErrorIs(t, r.Register("", constEstimator(1)), ErrInvalidValue)
	assert.ErrorIs(t, r.Register("nil", nil), ErrInvalidValue)
	// a nil EstimatorFunc is a non-nil interface that would panic when called
	assert.ErrorIs(t, r.Register("nil-func", EstimatorFunc(nil)), ErrInvalidValue)
	require.NoError(t, r.Register("once", constEstimator(1)))
	assert.ErrorIs(t, r.Register("once", constEstimator(1)), ErrDuplicateName)

	var zero Registry // the zero value holds the built-ins and is usable
	assert.Equal(t, Names(), zero.Names())
	require.NoError(t, zero.Register("mine", constEstimator(1)))
	assert.Equal(t, []string{
		"drgrpo", "gae", "gpg", "grpo", "grpo_passk", "mine", "opo",
		"reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo",
	}, zero.Names())
	assert.ErrorIs(t, zero.Register(GRPO, constEstimator(1)), ErrDuplicateName)

	var nilReg *Registry // a nil registry holds the built-ins, cannot Register, never panics
	assert.ErrorIs(t, nilReg.Register("x", constEstimator(1)), ErrInvalidValue)
	assert.Equal(t, Names(), nilReg.Names())
	_, ok := nilReg.Lookup(GRPO)
	assert.True(t, ok)
	_, ok = nilReg.Lookup("x")
	assert.False(t, ok)
	viaNil, err := nilReg.Compute(GRPO, fullBatch(), Config{})
	require.NoError(t, err)
	direct, err := Compute(GRPO, fullBatch(), Config{})
	require.NoError(t, err)
	assert.Equal(t, direct, viaNil)
}

func TestRegistryChecksCustomEstimators(t *testing.T) {
	r := NewRegistry()
	boom := errors.New("boom")
	require.NoError(t, r.Register("fails", EstimatorFunc(func(Input, Config) (Output, error) {
		return Output{}, boom
	})))
	require.NoError(t, r.Register("short", EstimatorFunc(func(in Input, _ Config) (Output, error) {
		return Output{Advantages: [][]float32{{1, 1}}, Returns: [][]float32{{1, 1}}}, nil
	})))
	require.NoError(t, r.Register("ragged", EstimatorFunc(func(in Input, c Config) (Output, error) {
		out, _ := constEstimator(1).Estimate(in, c)
		out.Returns[1] = out.Returns[1][:1]
		return out, nil
	})))
	require.NoError(t, r.Register("nan", EstimatorFunc(func(in Input, c Config) (Output, error) {
		out, _ := constEstimator(1).Estimate(in, c)
		out.Advantages[2][0] = float32(math.NaN())
		return out, nil
	})))
	called := false
	require.NoError(t, r.Register("spy", EstimatorFunc(func(in Input, c Config) (Output, error) {
		called = true
		return constEstimator(1).Estimate(in, c)
	})))

	_, err := r.Compute("fails", fullBatch(), Config{})
	assert.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "fails: boom")

	_, err = r.Compute("short", fullBatch(), Config{})
	assert.ErrorIs(t, err, ErrInvalidOutput)

	_, err = r.Compute("ragged", fullBatch(), Config{})
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Returns", fe.Field)
	assert.Equal(t, 1, fe.Row)

	_, err = r.Compute("nan", fullBatch(), Config{})
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, ErrInvalidOutput)
	assert.Equal(t, []int{2, 0}, []int{fe.Row, fe.Col})

	// Custom estimators only ever see validated input.
	bad := fullBatch()
	bad.Scores[0] = math.NaN()
	_, err = r.Compute("spy", bad, Config{})
	assert.ErrorIs(t, err, ErrNonFinite)
	assert.False(t, called)
}
