package advantage

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// constEstimator gives every mask-1 token the advantage c.
func constEstimator(c float32) EstimatorFunc {
	return func(in Input, _ Config) (Output, error) {
		out := Output{Advantages: make([][]float32, len(in.Mask)), Returns: make([][]float32, len(in.Mask))}
		for i, row := range in.Mask {
			out.Advantages[i] = make([]float32, len(row))
			out.Returns[i] = make([]float32, len(row))
			for t, m := range row {
				out.Advantages[i][t] = c * m
			}
		}
		return out, nil
	}
}

func TestRegistryRegisterAndCompute(t *testing.T) {
	r := NewRegistry()
	require.NoError(t, r.Register("const", constEstimator(2)))
	assert.Contains(t, r.Names(), Estimator("const"))

	out, err := r.Compute(Config{Estimator: "const"}, fullBatch())
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{2, 2}, {2, 0, 2}, {2}}, out.Advantages)

	// Built-ins still work through the registry and match Compute.
	viaReg, err := r.Compute(Config{Estimator: GRPO}, fullBatch())
	require.NoError(t, err)
	direct, err := Compute(Config{Estimator: GRPO}, fullBatch())
	require.NoError(t, err)
	assert.Equal(t, direct, viaReg)

	// Registries are independent: another default registry lacks "const".
	_, err = NewRegistry().Compute(Config{Estimator: "const"}, fullBatch())
	assert.ErrorIs(t, err, ErrUnknownName)
}

// The registry idiom that loss.Registry shares (see its registry_test.go):
// the zero value holds the built-ins, Register refuses a nil registry, an
// empty name, a nil implementation and a taken name with one wording,
// Names is sorted, an unknown name lists the known ones, and Register may
// run while others compute.

var builtinEstimators = []Estimator{
	"drgrpo", "gae", "gigpo", "gpg", "grpo", "grpo_passk", "opo",
	"reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "turn_grpo",
}

func TestRegistryZeroValueHoldsBuiltins(t *testing.T) {
	var zero Registry
	var nilReg *Registry
	for _, r := range []*Registry{&zero, nilReg, NewRegistry()} {
		assert.Equal(t, builtinEstimators, r.Names())
		for _, n := range builtinEstimators {
			f, ok := r.Lookup(n)
			assert.True(t, ok, n)
			assert.NotNil(t, f, n)
		}
		_, ok := r.Lookup("")
		assert.False(t, ok, "the empty name is not an estimator")
		viaReg, err := r.Compute(Config{Estimator: GRPO}, fullBatch())
		require.NoError(t, err)
		direct, err := Compute(Config{Estimator: GRPO}, fullBatch())
		require.NoError(t, err)
		assert.Equal(t, direct, viaReg)
	}
	// Names returns a fresh slice.
	n := zero.Names()
	n[0] = "x"
	assert.Equal(t, builtinEstimators, zero.Names())
}

// The empty name is GRPO, as the empty loss.Mode is vanilla.
func TestEmptyEstimatorIsGRPO(t *testing.T) {
	want, err := Compute(Config{Estimator: GRPO}, fullBatch())
	require.NoError(t, err)
	got, err := Compute(Config{}, fullBatch())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	var seen Estimator
	r := NewRegistry()
	require.NoError(t, r.Register("spy", func(in Input, cfg Config) (Output, error) {
		seen = cfg.Estimator
		return constEstimator(1)(in, cfg)
	}))
	_, err = r.Compute(Config{Estimator: "spy"}, fullBatch())
	require.NoError(t, err)
	assert.Equal(t, Estimator("spy"), seen, "an estimator sees the name it was resolved by")
}

func TestRegistryRegisterErrors(t *testing.T) {
	r := NewRegistry()
	var nilReg *Registry
	require.NoError(t, r.Register("mine", constEstimator(1)))
	for _, tc := range []struct {
		err      error
		sentinel error
		msg      string
	}{
		{r.Register(GRPO, constEstimator(1)), ErrDuplicateName, `advantage: Register("grpo"): name already registered`},
		{r.Register("mine", constEstimator(1)), ErrDuplicateName, `advantage: Register("mine"): name already registered`},
		{r.Register("", constEstimator(1)), ErrInvalidValue, `advantage: Register(""): empty name: invalid value`},
		{r.Register("x", nil), ErrInvalidValue, `advantage: Register("x"): nil EstimatorFunc: invalid value`},
		{nilReg.Register("x", constEstimator(1)), ErrInvalidValue, `advantage: Register("x"): nil *Registry: invalid value`},
	} {
		assert.ErrorIs(t, tc.err, tc.sentinel, tc.msg)
		assert.EqualError(t, tc.err, tc.msg)
	}
	_, ok := r.Lookup("x")
	assert.False(t, ok, "a failed Register adds nothing")

	var zero Registry // the zero value accepts Register
	require.NoError(t, zero.Register("mine", constEstimator(1)))
	assert.Contains(t, zero.Names(), Estimator("mine"))
}

func TestRegistryNamesSorted(t *testing.T) {
	r := NewRegistry()
	for _, n := range []Estimator{"zeta", "Alpha", "mid_1", "mid-0"} {
		require.NoError(t, r.Register(n, constEstimator(1)))
	}
	got := r.Names()
	assert.True(t, slices.IsSorted(got), "%v", got)
	assert.Equal(t, []Estimator{
		"Alpha", "drgrpo", "gae", "gigpo", "gpg", "grpo", "grpo_passk", "mid-0", "mid_1", "opo",
		"reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "turn_grpo", "zeta",
	}, got)
}

func TestRegistryUnknownNameListsKnown(t *testing.T) {
	r := NewRegistry()
	require.NoError(t, r.Register("mine", constEstimator(1)))
	_, err := r.Compute(Config{Estimator: "nope"}, fullBatch())
	assert.ErrorIs(t, err, ErrUnknownName)
	assert.EqualError(t, err, `advantage: Config.Estimator "nope" (registered: drgrpo, gae, gigpo, gpg, grpo, grpo_passk, mine, opo, `+
		`reinforce_plus_plus, reinforce_plus_plus_baseline, remax, rloo, turn_grpo): unknown name`)
	_, err = Compute(Config{Estimator: "nope"}, fullBatch())
	assert.EqualError(t, err, `advantage: Config.Estimator "nope" (registered: drgrpo, gae, gigpo, gpg, grpo, grpo_passk, opo, `+
		`reinforce_plus_plus, reinforce_plus_plus_baseline, remax, rloo, turn_grpo): unknown name`)
}

// Register runs while other goroutines look names up and compute with
// them; run with -race.
func TestRegistryConcurrentRegisterAndLookup(t *testing.T) {
	var r Registry
	want, err := Compute(Config{Estimator: RLOO}, fullBatch())
	require.NoError(t, err)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Go(func() { errs <- r.Register(Estimator(fmt.Sprintf("user-%02d", i)), constEstimator(float32(i))) })
		wg.Go(func() {
			if _, ok := r.Lookup(GRPO); !ok {
				errs <- fmt.Errorf("grpo not found")
				return
			}
			if len(r.Names()) < len(builtinEstimators) {
				errs <- fmt.Errorf("built-ins missing from Names")
				return
			}
			errs <- nil
		})
		wg.Go(func() {
			got, err := r.Compute(Config{Estimator: RLOO}, fullBatch())
			if err == nil && !slices.EqualFunc(got.Advantages, want.Advantages, slices.Equal) {
				err = fmt.Errorf("advantages %v, want %v", got.Advantages, want.Advantages)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Len(t, r.Names(), len(builtinEstimators)+n)
	got, err := r.Compute(Config{Estimator: "user-07"}, fullBatch())
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{7, 7}, {7, 0, 7}, {7}}, got.Advantages)
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
		out, _ := constEstimator(1)(in, c)
		out.Returns[1] = out.Returns[1][:1]
		return out, nil
	})))
	require.NoError(t, r.Register("nan", EstimatorFunc(func(in Input, c Config) (Output, error) {
		out, _ := constEstimator(1)(in, c)
		out.Advantages[2][0] = float32(math.NaN())
		return out, nil
	})))
	called := false
	require.NoError(t, r.Register("spy", EstimatorFunc(func(in Input, c Config) (Output, error) {
		called = true
		return constEstimator(1)(in, c)
	})))

	_, err := r.Compute(Config{Estimator: "fails"}, fullBatch())
	assert.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "fails: boom")

	_, err = r.Compute(Config{Estimator: "short"}, fullBatch())
	assert.ErrorIs(t, err, ErrInvalidOutput)

	_, err = r.Compute(Config{Estimator: "ragged"}, fullBatch())
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Returns", fe.Field)
	assert.Equal(t, 1, fe.Row)

	_, err = r.Compute(Config{Estimator: "nan"}, fullBatch())
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, ErrInvalidOutput)
	assert.Equal(t, []int{2, 0}, []int{fe.Row, fe.Col})

	// Custom estimators only ever see validated input.
	bad := fullBatch()
	bad.Scores[0] = math.NaN()
	_, err = r.Compute(Config{Estimator: "spy"}, bad)
	assert.ErrorIs(t, err, ErrNonFinite)
	assert.False(t, called)
}
