package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// copyLog records every whole-tensor copy between host and backend as
// "up w", "up g", "down w" or "down g" followed by the tensor's name.
type copyLog struct {
	backend.Backend
	names map[backend.Buffer]string
	log   []string
}

func (c *copyLog) Upload(dst backend.Buffer, off int, src []float32) error {
	c.log = append(c.log, "up "+c.names[dst])
	return c.Backend.Upload(dst, off, src)
}

func (c *copyLog) Download(dst []float32, src backend.Buffer, off int) error {
	c.log = append(c.log, "down "+c.names[src])
	return c.Backend.Download(dst, src, off)
}

// take returns the log so far and clears it.
func (c *copyLog) take() []string {
	out := c.log
	c.log = nil
	return out
}

// newTestWeights returns weights of two base tensors a and b, with their
// buffers named in be's log ("w a", "g a", ...).
func newTestWeights(t *testing.T) (*weights, *copyLog) {
	t.Helper()
	be := &copyLog{Backend: cpu.New(), names: map[backend.Buffer]string{}}
	ws, err := newWeights(be, []*param{
		{spec: TensorSpec{Name: "a", Shape: []int{2}}},
		{spec: TensorSpec{Name: "b", Shape: []int{3}}},
	})
	require.NoError(t, err)
	for _, p := range ws.base {
		require.NoError(t, ws.gradBuffer(p))
		be.names[p.w], be.names[p.dw] = "w "+p.spec.Name, "g "+p.spec.Name
	}
	return ws, be
}

// TestWeightsFreshness walks the weights through the states a model's
// life takes them through and checks, for each, which copies a
// computation (sync) or the host (pull, handOut) makes — derived from
// the rule that a copy is made exactly when the other side is newer, or
// when a holder of the host slices may have written them.
func TestWeightsFreshness(t *testing.T) {
	upW := []string{"up w a", "up w b"}
	upWG := []string{"up g a", "up w a", "up g b", "up w b"}
	for _, tc := range []struct {
		name  string
		steps func(t *testing.T, ws *weights, be *copyLog)
	}{
		{"a new model uploads once", func(t *testing.T, ws *weights, be *copyLog) {
			require.NoError(t, ws.sync())
			assert.Equal(t, upW, be.take())
			require.NoError(t, ws.sync())
			assert.Empty(t, be.take(), "nothing can have changed")
		}},
		{"the model's own write uploads again", func(t *testing.T, ws *weights, be *copyLog) {
			require.NoError(t, ws.sync())
			be.take()
			ws.hostWritten()
			require.NoError(t, ws.sync())
			assert.Equal(t, upW, be.take())
		}},
		{"handed-out slices upload before every computation", func(t *testing.T, ws *weights, be *copyLog) {
			views := ws.handOut()
			require.Len(t, views, 2)
			for range 2 {
				require.NoError(t, ws.sync())
				assert.Equal(t, upW, be.take())
			}
		}},
		{"home on the backend: up once, down on demand", func(t *testing.T, ws *weights, be *copyLog) {
			require.NoError(t, ws.sync())
			require.NoError(t, ws.finishGrads()) // a backward added into the host gradients
			be.take()
			ws.moveToBackend()
			require.NoError(t, ws.sync())
			assert.Equal(t, upWG, be.take(), "weights and the gradients accumulated so far")
			require.NoError(t, ws.sync())
			require.NoError(t, ws.pull(true))
			assert.Empty(t, be.take(), "both sides agree")
			ws.stepped()
			require.NoError(t, ws.pull(false))
			assert.Equal(t, []string{"down w a", "down w b"}, be.take())
			ws.gradsWritten()
			require.NoError(t, ws.pull(true))
			assert.Equal(t, []string{"down g a", "down g b"}, be.take())
			require.NoError(t, ws.push())
			assert.Equal(t, []string{"up w a", "up g a", "up w b", "up g b"}, be.take(), "a restore")
		}},
		{"a move with zero host gradients uploads the weights only", func(t *testing.T, ws *weights, be *copyLog) {
			ws.moveToBackend()
			require.NoError(t, ws.sync())
			assert.Equal(t, upW, be.take(), "the backend's gradients are zero already")
		}},
		{"weights drawn on the backend: no upload, down on hand-out", func(t *testing.T, ws *weights, be *copyLog) {
			no := func(string) bool { return false }
			require.NoError(t, ws.initOnBackend(be.Backend.(backend.Initializer), 1, 0.5, no, no))
			require.NoError(t, ws.sync())
			assert.Empty(t, be.take(), "the backend holds the newest weights")
			views := ws.handOut()
			assert.Equal(t, []string{"down w a", "down w b"}, be.take())
			assert.NotZero(t, views[0].Data[0], "the drawn values reached the host")
			require.NoError(t, ws.sync())
			assert.Equal(t, upW, be.take(), "handed out: uploaded before each computation")
		}},
		{"handing out a backend home brings it back", func(t *testing.T, ws *weights, be *copyLog) {
			ws.moveToBackend()
			require.NoError(t, ws.sync())
			be.take()
			ws.stepped()
			ws.gradsWritten()
			ws.handOut()
			assert.Equal(t, []string{"down w a", "down g a", "down w b", "down g b"}, be.take())
			assert.False(t, ws.onBackend)
			require.NoError(t, ws.sync())
			assert.Equal(t, upW, be.take(), "the holder may write them now")
		}},
		{"frozen base under an adapter uploads once", func(t *testing.T, ws *weights, be *copyLog) {
			require.NoError(t, ws.sync())
			be.take()
			ad := &param{spec: TensorSpec{Name: "lora", Shape: []int{1}}}
			require.NoError(t, ws.alloc(ad))
			be.names[ad.w] = "w lora"
			ws.freezeBase([]*param{ad})
			assert.Equal(t, []*param{ad}, ws.trainable())
			assert.Nil(t, ws.base[0].grad)
			require.NoError(t, ws.sync())
			assert.Equal(t, []string{"up w a", "up w b", "up w lora"}, be.take())
			ws.handOut()
			require.NoError(t, ws.sync())
			assert.Equal(t, []string{"up w lora"}, be.take(), "only what a holder can write")
		}},
		{"a closed model refuses", func(t *testing.T, ws *weights, be *copyLog) {
			ws.free()
			require.ErrorIs(t, ws.sync(), ErrInput)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, be := newTestWeights(t)
			tc.steps(t, ws, be)
		})
	}
}

// TestFinishGradsAccumulatesOnTheHome: with the home on the host a
// backward's gradients are added into the host's (2 + 3 = 5); with the
// home on the backend they stay there.
func TestFinishGradsAccumulatesOnTheHome(t *testing.T) {
	ws, be := newTestWeights(t)
	a := ws.base[0]
	a.grad[0] = 2
	require.NoError(t, ws.prepareGrads())
	require.NoError(t, be.Upload(a.dw, 0, []float32{3, 0}))
	require.NoError(t, ws.finishGrads())
	assert.Equal(t, []float32{5, 0}, a.grad)

	ws.moveToBackend()
	require.NoError(t, ws.sync())
	be.take()
	require.NoError(t, ws.finishGrads())
	assert.Empty(t, be.take(), "nothing crosses")
	assert.Equal(t, backendNewer, ws.trainG)
}

// TestPassRecyclesAndSticks: a pass hands recycled buffers of the same
// length back (so layers after the first allocate nothing), zeros a
// recycled buffer only when asked for zeros, keeps the first error and
// skips every later operation.
func TestPassRecyclesAndSticks(t *testing.T) {
	be := cpu.New()
	tp := newPass(be, false, false)
	defer tp.free()
	x := tp.alloc(4)
	mark := tp.mark()
	a := tp.alloc(3)
	require.NoError(t, be.Upload(a, 0, []float32{1, 2, 3}))
	kept := tp.alloc(2)
	tp.recycle(mark, kept)
	again := tp.alloc(3)
	assert.Same(t, a, again, "recycled")
	z := tp.zeros(3)
	assert.NotSame(t, a, z)
	tp.recycle(mark, kept)
	z = tp.zeros(3)
	got := make([]float32, 3)
	require.NoError(t, be.Download(got, z, 0))
	assert.Equal(t, []float32{0, 0, 0}, got, "a recycled buffer asked for as zeros is zeroed")
	assert.Len(t, tp.bufs, 3, "x, kept and z; a waits in spare")
	_ = x

	calls := 0
	tp.where = "layer 2"
	tp.do("first", func() error { calls++; return backend.ErrShape })
	tp.do("second", func() error { calls++; return nil })
	assert.Equal(t, 1, calls)
	require.ErrorIs(t, tp.err, backend.ErrShape)
	assert.EqualError(t, tp.err, "policy: layer 2 first: "+backend.ErrShape.Error())
	assert.Nil(t, tp.alloc(1), "no allocation after an error")
}

// TestLayoutDeclaresEachTensorOnce: every tensor the layout declares is
// read by exactly one module (the tied embedding by two: the embedding
// and the LM head), and the module tree's names are the checkpoint's.
func TestLayoutDeclaresEachTensorOnce(t *testing.T) {
	for _, name := range []string{"qwen3-tiny", "qwen2-tiny", "llama-tiny"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ReadConfig("testdata/model/" + name)
			require.NoError(t, err)
			net, params := layout(cfg)
			uses := map[*param]int{}
			use := func(ps ...*param) {
				for _, p := range ps {
					if p != nil {
						uses[p]++
					}
				}
			}
			use(net.embed.w, net.norm.w, net.head.w)
			for i := range net.layers {
				l := &net.layers[i]
				use(l.inputNorm.w, l.postNorm.w)
				if l.attn.qNorm != nil {
					use(l.attn.qNorm.w, l.attn.kNorm.w)
				}
				for slot := range numLoRASlots {
					lin := l.projection(slot)
					use(lin.w, lin.b)
					assert.Equal(t, lin.path+".weight", lin.w.spec.Name)
				}
			}
			require.Len(t, uses, len(params), "every declared tensor is used")
			for _, p := range params {
				want := 1
				if p == net.embed.w && cfg.TieWordEmbeddings {
					want = 2
				}
				assert.Equal(t, want, uses[p], p.spec.Name)
			}
		})
	}
}
