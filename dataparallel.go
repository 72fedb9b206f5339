package agentrl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// DataParallel makes a trainer one rank of a data-parallel job: every
// rank holds the whole model and the whole optimizer state, rolls out
// (or reads) its shard of each batch, and the ranks sum their gradients
// before every update, so that the optimizer steps identically
// everywhere. Rank 0 writes the metrics log, the checkpoints and the
// weight publications; every rank resumes from the same checkpoint.
//
// The zero value — and a Comm of one rank — trains alone, exactly as
// without it.
type DataParallel struct {
	// Comm connects the ranks (dist.Open). nil or one rank: no data
	// parallelism.
	Comm dist.Comm
	// BucketBytes is the size of the gradient buckets: gradients are
	// packed into buckets and each bucket is all-reduced in one
	// collective. 0 means 25 MiB, PyTorch DDP's bucket_cap_mb.
	BucketBytes int
	// AllowWorldSizeChange lets a trainer resume a checkpoint written by
	// a job of another number of ranks. Every rank's state is complete
	// (parameters and moments are not sharded), so the resumed run is
	// sound, but it is not the run an uninterrupted job would have made:
	// the batches' shards and the order of the gradient sums change. By
	// default such a checkpoint is refused.
	AllowWorldSizeChange bool
}

// DefaultBucketBytes is DataParallel.BucketBytes' default.
const DefaultBucketBytes = 25 << 20

// dp is a trainer's data-parallel state; nil when training alone.
type dp struct {
	comm       dist.Comm
	rank, size int
	bucket     int  // float32 elements per bucket
	ready      bool // the ranks' configurations checked and weights broadcast

	host []float32      // host bucket
	dev  backend.Buffer // device bucket (NCCL)
	be   backend.Backend

	// Per step: the seconds waiting for the slowest rank before the
	// gradient all-reduces, the seconds and bytes of the all-reduces.
	wait, seconds float64
	bytes         int64
}

// newDP checks d and returns nil when it trains alone.
func newDP(d DataParallel, field string) (*dp, error) {
	if d.BucketBytes < 0 {
		return nil, fmt.Errorf("%w: %s.BucketBytes %d, want ≥ 0", ErrTrainerConfig, field, d.BucketBytes)
	}
	if d.Comm == nil || d.Comm.Size() <= 1 {
		return nil, nil
	}
	b := d.BucketBytes
	if b == 0 {
		b = DefaultBucketBytes
	}
	return &dp{comm: d.Comm, rank: d.Comm.Rank(), size: d.Comm.Size(), bucket: max(b/4, 1)}, nil
}

// world is the number of ranks (1 alone).
func (d *dp) world() int {
	if d == nil {
		return 1
	}
	return d.size
}

// leader reports whether this rank writes the job's files (true alone).
func (d *dp) leader() bool { return d == nil || d.rank == 0 }

// block returns rank r's contiguous share [lo, hi) of n items.
func (d *dp) block(n int) (lo, hi int) {
	if d == nil {
		return 0, n
	}
	return d.rank * n / d.size, (d.rank + 1) * n / d.size
}

// start checks, at the first step, that every rank was configured alike
// (fingerprint: named values that must agree) and gives every rank rank
// 0's weights, as PyTorch's DDP does when it wraps a model.
func (d *dp) start(ctx context.Context, opt policy.Optimizer, fingerprint []namedValue) error {
	if d == nil || d.ready {
		return nil
	}
	params, err := opt.Params()
	if err != nil {
		return err
	}
	var n float64
	for _, p := range params {
		n += float64(len(p.Data))
	}
	fingerprint = append(fingerprint, namedValue{"the number of trained parameters", n}, namedValue{"the number of parameter tensors", float64(len(params))})
	if err := d.same(ctx, fingerprint); err != nil {
		return err
	}
	err = opt.LoadParams(func(ps []lm.Param) error {
		for _, p := range ps {
			if err := d.comm.Broadcast(ctx, dist.Float32s(p.Data), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentrl: broadcasting rank 0's weights: %w", err)
	}
	d.ready = true
	return nil
}

// namedValue is one item of a configuration fingerprint.
type namedValue struct {
	name  string
	value float64
}

// same fails, on every rank, when a value differs between ranks.
func (d *dp) same(ctx context.Context, vals []namedValue) error {
	v := make(dist.Float64s, 2*len(vals))
	for i, nv := range vals {
		v[2*i], v[2*i+1] = nv.value, -nv.value
	}
	if err := d.comm.AllReduce(ctx, v, dist.Max); err != nil {
		return err
	}
	for i, nv := range vals {
		if hi, lo := v[2*i], -v[2*i+1]; hi != lo {
			return fmt.Errorf("%w: the ranks disagree on %s (from %v to %v; this rank has %v): start every rank with the same configuration and data",
				ErrTrainer, nv.name, lo, hi, nv.value)
		}
	}
	return nil
}

// agree tells every rank whether any rank's err is set: it returns err
// on the ranks that failed and, on the others, an error naming the
// ranks that did (what says what they were doing). Every rank calls it
// at the same point.
func (d *dp) agree(ctx context.Context, err error, what string) error {
	if d == nil {
		return err
	}
	flags := make(dist.Float64s, d.size)
	if err != nil {
		flags[d.rank] = 1
	}
	if cerr := d.comm.AllReduce(ctx, flags, dist.Max); cerr != nil {
		return errors.Join(err, cerr)
	}
	if err != nil {
		return err
	}
	var failed []int
	for r, f := range flags {
		if f != 0 {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("agentrl: %s failed on rank(s) %v (their own error is in their output)", what, failed)
	}
	return nil
}

// gradReducer is an optimizer whose gradients are backend buffers
// (*policy.DeviceAdamW).
type gradReducer interface {
	ReduceGrads(reduce func(be backend.Backend, grads []backend.Buffer) error) error
}

// syncGrads sums the ranks' gradients in buckets of d.bucket elements:
// on the backend's memory when the communicator runs there (NCCL), in a
// host bucket otherwise (MPI).
//
// A barrier first separates the wait for the slowest rank (its rollouts
// or its backward took longer) from the all-reduce itself, so that the
// metrics tell load imbalance from communication.
func (d *dp) syncGrads(ctx context.Context, opt policy.Optimizer) error {
	arrived := time.Now()
	if err := d.comm.Barrier(ctx); err != nil {
		return err
	}
	start := time.Now()
	d.wait += start.Sub(arrived).Seconds()
	defer func() { d.seconds += time.Since(start).Seconds() }()
	if r, ok := opt.(gradReducer); ok {
		return r.ReduceGrads(func(be backend.Backend, grads []backend.Buffer) error {
			lens := make([]int, len(grads))
			for i, g := range grads {
				lens[i] = g.Len()
			}
			if dc, ok := d.comm.(dist.DeviceComm); ok && dc.Backend() == be {
				return d.reduceDevice(ctx, be, grads, lens)
			}
			return d.reduceHost(ctx, lens,
				func(p piece, dst []float32) error { return be.Download(dst, grads[p.i], p.off) },
				func(p piece, src []float32) error { return be.Upload(grads[p.i], p.off, src) })
		})
	}
	params, err := opt.Params()
	if err != nil {
		return err
	}
	lens := make([]int, len(params))
	for i, p := range params {
		lens[i] = len(p.Grad)
	}
	return d.reduceHost(ctx, lens,
		func(p piece, dst []float32) error { copy(dst, params[p.i].Grad[p.off:p.off+p.n]); return nil },
		func(p piece, src []float32) error { copy(params[p.i].Grad[p.off:p.off+p.n], src); return nil })
}

// piece is n elements at off of tensor i, at pos in its bucket.
type piece struct{ i, off, n, pos int }

// buckets cuts tensors of lengths lens, in order, into buckets of at
// most size elements; a tensor larger than a bucket spans several.
func buckets(lens []int, size int) [][]piece {
	var out [][]piece
	var cur []piece
	fill := 0
	for i, n := range lens {
		for off := 0; off < n; {
			k := min(n-off, size-fill)
			cur = append(cur, piece{i: i, off: off, n: k, pos: fill})
			off += k
			fill += k
			if fill == size {
				out, cur, fill = append(out, cur), nil, 0
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// reduceHost sums tensors through a host bucket: get copies a piece in,
// put copies the sum back.
func (d *dp) reduceHost(ctx context.Context, lens []int, get, put func(p piece, buf []float32) error) error {
	if d.host == nil {
		total := 0
		for _, n := range lens {
			total += n
		}
		d.host = make([]float32, min(d.bucket, max(total, 1)))
	}
	for _, b := range buckets(lens, len(d.host)) {
		last := b[len(b)-1]
		fill := last.pos + last.n
		for _, p := range b {
			if err := get(p, d.host[p.pos:p.pos+p.n]); err != nil {
				return err
			}
		}
		if err := d.comm.AllReduce(ctx, dist.Float32s(d.host[:fill]), dist.Sum); err != nil {
			return err
		}
		d.bytes += 4 * int64(fill)
		for _, p := range b {
			if err := put(p, d.host[p.pos:p.pos+p.n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceDevice sums backend buffers through a bucket in the backend's
// memory (device-to-device copies around each NCCL all-reduce).
func (d *dp) reduceDevice(ctx context.Context, be backend.Backend, grads []backend.Buffer, lens []int) error {
	if d.dev == nil || d.be != be {
		total := 0
		for _, n := range lens {
			total += n
		}
		b, err := be.Alloc(min(d.bucket, max(total, 1)))
		if err != nil {
			return fmt.Errorf("agentrl: gradient bucket: %w", err)
		}
		d.dev, d.be = b, be
	}
	for _, b := range buckets(lens, d.dev.Len()) {
		last := b[len(b)-1]
		fill := last.pos + last.n
		for _, p := range b {
			if err := be.Copy(d.dev, p.pos, grads[p.i], p.off, p.n); err != nil {
				return err
			}
		}
		if err := d.comm.AllReduce(ctx, dist.Device{Buffer: d.dev, N: fill}, dist.Sum); err != nil {
			return err
		}
		d.bytes += 4 * int64(fill)
		for _, p := range b {
			if err := be.Copy(grads[p.i], p.off, d.dev, p.pos, p.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// close frees the device bucket.
func (d *dp) close() error {
	if d == nil || d.dev == nil {
		return nil
	}
	err := d.be.Free(d.dev)
	d.dev = nil
	return err
}

// takeCounters returns and resets the step's seconds waiting for the
// slowest rank, seconds all-reducing and bytes all-reduced.
func (d *dp) takeCounters() (wait, seconds float64, bytes int64) {
	wait, seconds, bytes = d.wait, d.seconds, d.bytes
	d.wait, d.seconds, d.bytes = 0, 0, 0
	return
}

// reduce all-reduces v with op in place.
func (d *dp) reduce(ctx context.Context, v []float64, op dist.Op) error {
	if len(v) == 0 {
		return nil
	}
	return d.comm.AllReduce(ctx, dist.Float64s(v), op)
}
