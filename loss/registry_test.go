package loss_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"

	"github.com/agentrl/agentrl/loss"
)

// The registry idiom that advantage.Registry shares (see its
// registry_test.go): the zero value holds the built-ins, Register refuses
// a nil registry, an empty name, a nil implementation and a taken name
// with one wording, Names is sorted, an unknown name lists the known ones,
// and Register may run while others look names up.

var builtinModes = []loss.Mode{"cispo", "geo_mean", "gpg", "gspo", "sapo", "vanilla"}

// negLogProb is −A·logπ, gpg's objective, as a user variant.
var negLogProb = loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
	pt, err := gorgonia.HadamardProd(in.LogProbs, in.Advantages)
	if err != nil {
		return loss.Term{}, err
	}
	pt, err = gorgonia.Neg(pt)
	return loss.Term{PerToken: pt}, err
}}

func TestRegistryZeroValueHoldsBuiltins(t *testing.T) {
	var zero loss.Registry
	var nilReg *loss.Registry
	for _, r := range []*loss.Registry{&zero, nilReg, loss.NewRegistry()} {
		assert.Equal(t, builtinModes, r.Names())
		for _, m := range builtinModes {
			v, ok := r.Lookup(m)
			assert.True(t, ok, m)
			assert.True(t, v.Loss != nil || v.Build != nil, m)
		}
		_, ok := r.Lookup("")
		assert.False(t, ok, "the empty name is not a mode")
	}
	// Names returns a fresh slice.
	n := zero.Names()
	n[0] = "x"
	assert.Equal(t, builtinModes, zero.Names())
}

func TestRegistryRegisterErrors(t *testing.T) {
	r := loss.NewRegistry()
	var nilReg *loss.Registry
	require.NoError(t, r.Register("mine", negLogProb))
	for _, tc := range []struct {
		err      error
		sentinel error
		msg      string
	}{
		{r.Register("vanilla", negLogProb), loss.ErrDuplicateName, `loss: Register("vanilla"): name already registered`},
		{r.Register("mine", negLogProb), loss.ErrDuplicateName, `loss: Register("mine"): name already registered`},
		{r.Register("", negLogProb), loss.ErrConfig, `loss: Register(""): empty name: invalid loss config`},
		{r.Register("x", loss.Variant{}), loss.ErrConfig, `loss: Register("x"): Variant sets neither Loss nor Build: invalid loss config`},
		{r.Register("x", loss.Variant{Build: negLogProb.Build, Loss: func(v *loss.Vars) loss.Expr { return v.LogProbs() }}), loss.ErrConfig,
			`loss: Register("x"): Variant sets both Loss and Build: invalid loss config`},
		{r.Register("x", loss.Variant{Build: negLogProb.Build, Agg: "median"}), loss.ErrUnknownName,
			`loss: Register("x"): Variant.Agg "median" (want one of token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm): unknown name`},
		{nilReg.Register("x", negLogProb), loss.ErrConfig, `loss: Register("x"): nil *Registry: invalid loss config`},
	} {
		assert.ErrorIs(t, tc.err, tc.sentinel, tc.msg)
		assert.EqualError(t, tc.err, tc.msg)
	}
	_, ok := r.Lookup("x")
	assert.False(t, ok, "a failed Register adds nothing")
}

func TestRegistryNamesSorted(t *testing.T) {
	r := loss.NewRegistry()
	for _, n := range []loss.Mode{"zeta", "Alpha", "mid_1", "mid-0"} {
		require.NoError(t, r.Register(n, negLogProb))
	}
	got := r.Names()
	assert.True(t, slices.IsSorted(got), "%v", got)
	assert.Equal(t, []loss.Mode{"Alpha", "cispo", "geo_mean", "gpg", "gspo", "mid-0", "mid_1", "sapo", "vanilla", "zeta"}, got)
}

func TestRegistryUnknownNameListsKnown(t *testing.T) {
	r := loss.NewRegistry()
	require.NoError(t, r.Register("mine", negLogProb))
	_, err := loss.NewComputer(r).Compute(loss.Config{Mode: "nope"}, handBatch())
	assert.ErrorIs(t, err, loss.ErrUnknownName)
	assert.EqualError(t, err, `loss: Config.Mode "nope" (registered: cispo, geo_mean, gpg, gspo, mine, sapo, vanilla): unknown name`)
	_, err = loss.Compute(loss.Config{Mode: "nope"}, handBatch())
	assert.EqualError(t, err, `loss: Config.Mode "nope" (registered: cispo, geo_mean, gpg, gspo, sapo, vanilla): unknown name`)
}

// Register runs while other goroutines look modes up and compute with
// them; run with -race.
func TestRegistryConcurrentRegisterAndLookup(t *testing.T) {
	var r loss.Registry
	c := loss.NewComputer(&r, loss.WithCacheSize(0))
	want, err := loss.Compute(loss.Config{Mode: loss.ModeGPG}, handBatch())
	require.NoError(t, err)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Go(func() { errs <- r.Register(loss.Mode(fmt.Sprintf("user-%02d", i)), negLogProb) })
		wg.Go(func() {
			if _, ok := r.Lookup(loss.ModeVanilla); !ok {
				errs <- fmt.Errorf("vanilla not found")
				return
			}
			if len(r.Names()) < len(builtinModes) {
				errs <- fmt.Errorf("built-ins missing from Names")
				return
			}
			errs <- nil
		})
		wg.Go(func() {
			got, err := c.Compute(loss.Config{Mode: loss.ModeGPG}, handBatch())
			if err == nil && got.Loss != want.Loss {
				err = fmt.Errorf("loss %v, want %v", got.Loss, want.Loss)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Len(t, r.Names(), len(builtinModes)+n)
	got, err := c.Compute(loss.Config{Mode: "user-07"}, handBatch())
	require.NoError(t, err)
	assert.Equal(t, want.Loss, got.Loss, "a registered gpg computes gpg's loss")
}
