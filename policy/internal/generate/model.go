package generate

import (
	"sync"

	"github.com/agentrl/agentrl/policy/backend"
)

// Model is what an Engine needs of a model: its shape, the model to
// itself for a while, its current weights, and one forward step over the
// rows of a Batch whose attention runs over the engine's paged KV cache.
// Package policy's Model provides it; the engine never sees its modules
// or weights.
type Model interface {
	// Lock and Unlock give the engine the model to itself: no other
	// computation on it (training included) runs between them. The
	// engine holds the lock for a burst of generation, from the first
	// step after it was idle to the last, and while it frees KV-cache
	// memory; every call below is made with it held.
	sync.Locker
	// Spec describes the model. The engine reads it when requests
	// arrive, when a burst starts and when it sizes the KV cache.
	Spec() Spec
	// SyncWeights makes the weights that the following Forward calls
	// read the model's current ones (a backend's copy brought up to
	// date). The engine calls it when a burst starts; the weights then
	// stay fixed until it unlocks the model, since nothing else runs on
	// it meanwhile.
	SyncWeights() error
	// Forward runs the model over b's rows, attention through b.Attend,
	// and hands the logits of b.Outputs to b.Sample.
	Forward(b *Batch) error
}

// Spec is a Model's shape, as the engine needs it.
type Spec struct {
	// Layers, KVHeads and HeadDim are the shape of the keys and values
	// that each token leaves in the KV cache, per layer.
	Layers, KVHeads, HeadDim int
	// Vocab is the vocabulary's size: token ids are in [0, Vocab), and
	// a row of logits has Vocab values.
	Vocab int
	// MaxPositions is the context (max_position_embeddings): a sequence
	// ends when it fills it.
	MaxPositions int
	// EOS are the end-of-sequence tokens that end a generation.
	EOS []int
	// Step estimates the memory of one forward step.
	Step StepMemory
}

// StepMemory estimates the device memory a forward step needs besides
// the KV cache, for the cache's sizing: PerRow bytes for each row of the
// step, PerOutput for each row whose logits are computed, and Fixed.
type StepMemory struct {
	PerRow, PerOutput, Fixed int64
}

// Batch is one forward step of the engine, the rows of every sequence it
// advances side by side (prompt chunks and decode rows mixed), as
// ollama's runner hands its model an input.Batch.
type Batch struct {
	// Tokens and Positions are the step's rows: row i feeds token
	// Tokens[i] at position Positions[i] of its sequence.
	Tokens, Positions []int32
	// Attend takes the place of attention over the rows: Forward calls
	// it once per layer, in order.
	Attend AttendFunc
	// Outputs are the rows whose next-token logits Sample receives, in
	// this order; Sample is not called when there are none.
	Outputs []int32
	// Sample receives the logits of Outputs, [len(Outputs), Vocab] on
	// the model's backend, which stay valid until it returns.
	Sample func(logits backend.Buffer) error
}

// AttendFunc stores a layer's keys k (after norm and RoPE) and values v
// of the step's rows in the KV cache and writes the attention of the
// queries q over the cache into out; shapes as backend.Attention's, one
// row per row of the step.
type AttendFunc func(layer int, a backend.Attention, out, q, k, v backend.Buffer) error
