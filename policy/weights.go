package policy

import (
	"fmt"
	"slices"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// param is one tensor of the model: its host values and gradient and
// their backend copies.
type param struct {
	spec TensorSpec
	data []float32
	grad []float32 // nil when frozen
	w    backend.Buffer
	dw   backend.Buffer // allocated by the first backward; nil when frozen
	// frozen: not trained (the base weights under a LoRA adapter).
	frozen bool
}

// freshness says which copy of a group of tensors holds the newest
// values.
type freshness uint8

const (
	inSync       freshness = iota // host and backend agree
	hostNewer                     // the host slices were written since the last upload
	backendNewer                  // the backend buffers were written since the last download
)

// weights owns the model's tensors and knows, for each of three groups —
// the frozen weights, the trainable weights and the trainable gradients
// — which copy, host or backend, holds the newest values, and so what
// must be copied before a computation or when the host asks for them.
//
// The training state has a home. On the host (the default), an optimizer
// over Params writes the host slices, every backward adds its gradients
// into them, and the backend's gradient buffers are scratch for one
// pass. On the backend (a DeviceAdamW), weights, gradients and moments
// stay in backend buffers, and the host copies are refreshed only when
// asked for.
//
// The caller (Model) serialises every use under its mutex.
type weights struct {
	be backend.Backend
	// base are the checkpoint's tensors in state_dict order (tied
	// embeddings once); adapter the LoRA A and B tensors in PEFT's order,
	// empty without an adapter. With an adapter the base is frozen.
	base    []*param
	adapter []*param
	byName  map[string]*param

	// onBackend: the training state's home is the backend.
	onBackend bool
	// shared: Params handed the trainable host slices out, so their
	// holder may write them at any time; with the home on the host,
	// every computation therefore uploads them.
	shared bool
	// frozenW, trainW and trainG say where the newest frozen weights,
	// trainable weights and (home on the backend) trainable gradients
	// are.
	frozenW, trainW, trainG freshness
	// hostGradsZero: no backward has added into the host gradients and
	// no holder has had them, so they are all zero (a move to the backend
	// need not upload them).
	hostGradsZero bool
	// streamGrads (home on the backend): the model holds no gradient
	// between backward passes. A backward gives each trainable tensor a
	// gradient buffer when its layer starts and hands it to the sharded
	// optimizer when the layer is done (gradFlow), so the trainable
	// tensors' dw are nil outside a backward.
	streamGrads bool
}

// newWeights allocates the declared tensors params (zero) on the host
// and the backend. Everything is hostNewer: the first computation
// uploads it.
func newWeights(be backend.Backend, params []*param) (*weights, error) {
	ws := &weights{be: be, byName: make(map[string]*param, len(params)), frozenW: hostNewer, trainW: hostNewer, hostGradsZero: true}
	for _, p := range params {
		if err := ws.alloc(p); err != nil {
			ws.free()
			return nil, err
		}
		ws.base = append(ws.base, p)
		ws.byName[p.spec.Name] = p
	}
	return ws, nil
}

// alloc gives a declared tensor zero host values and gradient and a
// backend buffer.
func (ws *weights) alloc(p *param) error {
	n := int(p.spec.Size())
	w, err := ws.be.Alloc(n)
	if err != nil {
		return fmt.Errorf("policy: allocating %s: %w", p.spec.Name, err)
	}
	p.data, p.grad, p.w = make([]float32, n), make([]float32, n), w
	return nil
}

// get returns the tensor called name, nil when there is none.
func (ws *weights) get(name string) *param { return ws.byName[name] }

// closed reports whether the backend buffers were freed.
func (ws *weights) closed() bool { return len(ws.base) == 0 || ws.base[0].w == nil }

// all lists the base tensors, then the adapter's.
func (ws *weights) all() []*param { return append(slices.Clip(ws.base), ws.adapter...) }

// trainable lists what the optimizer updates: the adapter's tensors
// when there is an adapter, else every base tensor.
func (ws *weights) trainable() []*param {
	if len(ws.adapter) > 0 {
		return ws.adapter
	}
	return ws.base
}

// views lists the trainable tensors' host slices.
func (ws *weights) views() []lm.Param {
	ps := ws.trainable()
	out := make([]lm.Param, len(ps))
	for i, p := range ps {
		out[i] = lm.Param{Name: p.spec.Name, Data: p.data, Grad: p.grad}
	}
	return out
}

// initOnBackend draws the base tensors on the backend: norm weights 1,
// biases 0, the others std·N(0, 1) from stream k of seed
// (backend.StreamSeed) for the k-th tensor. The backend then holds the
// newest weights; the host copies stay zero until pulled.
func (ws *weights) initOnBackend(ini backend.Initializer, seed uint64, std float32, isNorm, isBias func(string) bool) error {
	for k, p := range ws.base {
		var err error
		switch {
		case isNorm(p.spec.Name):
			err = ws.be.Fill(p.w, 1)
		case isBias(p.spec.Name):
			err = ws.be.Fill(p.w, 0)
		default:
			err = ini.RandNormal(p.w, backend.StreamSeed(seed, k), std)
		}
		if err != nil {
			return fmt.Errorf("policy: initializing %s on the backend: %w", p.spec.Name, err)
		}
	}
	ws.frozenW, ws.trainW = inSync, backendNewer
	return nil
}

// free releases every backend buffer.
func (ws *weights) free() {
	for _, p := range ws.all() {
		if p.w != nil {
			_ = ws.be.Free(p.w)
		}
		if p.dw != nil {
			_ = ws.be.Free(p.dw)
		}
		p.w, p.dw = nil, nil
	}
}

// hostWritten records that the model wrote host values itself (a load,
// an adapter attached, merged or unmerged): the next computation uploads
// every weight. The host copies must have been current before the write
// (pull first).
func (ws *weights) hostWritten() { ws.frozenW, ws.trainW = hostNewer, hostNewer }

// sync uploads what the backend lacks before a computation: frozen and
// trainable weights written on the host, the trainable weights of a
// holder of the host slices (home on the host, shared), and gradients
// written on the host (home on the backend).
func (ws *weights) sync() error {
	if ws.closed() {
		return fmt.Errorf("%w: the model is closed", ErrInput)
	}
	upW := ws.trainW == hostNewer || (!ws.onBackend && ws.shared)
	upG := ws.onBackend && ws.trainG == hostNewer && !ws.streamGrads
	for _, p := range ws.all() {
		switch {
		case p.frozen && ws.frozenW != hostNewer:
			continue
		case !p.frozen && upG:
			if err := ws.uploadGrad(p); err != nil {
				return err
			}
		}
		if !p.frozen && !upW {
			continue
		}
		if err := ws.be.Upload(p.w, 0, p.data); err != nil {
			return fmt.Errorf("policy: uploading %s: %w", p.spec.Name, err)
		}
	}
	ws.frozenW = inSync
	if upW {
		ws.trainW = inSync
	}
	if upG {
		ws.trainG = inSync
	}
	return nil
}

// pull copies the backend's trainable weights into the host slices when
// they are newer (after a step on the backend), and with grads the
// gradients too.
func (ws *weights) pull(grads bool) error {
	pullW, pullG := ws.trainW == backendNewer, grads && ws.trainG == backendNewer
	if !pullW && !pullG {
		return nil
	}
	if ws.closed() {
		return fmt.Errorf("%w: the model is closed", ErrInput)
	}
	for _, p := range ws.trainable() {
		if pullW {
			if err := ws.be.Download(p.data, p.w, 0); err != nil {
				return fmt.Errorf("policy: downloading %s: %w", p.spec.Name, err)
			}
		}
		if !pullG {
			continue
		}
		if p.dw == nil {
			clear(p.grad)
		} else if err := ws.be.Download(p.grad, p.dw, 0); err != nil {
			return fmt.Errorf("policy: downloading the gradient of %s: %w", p.spec.Name, err)
		}
	}
	if pullW {
		ws.trainW = inSync
	}
	if pullG {
		ws.trainG = inSync
	}
	return nil
}

// push uploads the trainable host weights and gradients (a restore of a
// state whose home is the backend; streamed gradients are not the
// model's to upload).
func (ws *weights) push() error {
	for _, p := range ws.trainable() {
		if err := ws.be.Upload(p.w, 0, p.data); err != nil {
			return fmt.Errorf("policy: uploading %s: %w", p.spec.Name, err)
		}
		if ws.streamGrads {
			continue
		}
		if err := ws.uploadGrad(p); err != nil {
			return err
		}
	}
	ws.trainW, ws.trainG = inSync, inSync
	return nil
}

// moveToBackend makes the backend the home of the training state; the
// host holds it until then, so the next computation uploads the weights
// and the gradients accumulated so far.
func (ws *weights) moveToBackend() {
	if ws.onBackend {
		return
	}
	ws.onBackend = true
	if ws.trainW != backendNewer {
		ws.trainW = hostNewer
	}
	ws.trainG = hostNewer
	if ws.hostGradsZero {
		// The backend's gradient buffers start zero (or are zeroed by
		// prepareGrads at the home's change below): nothing to upload.
		ws.trainG = inSync
		for _, p := range ws.trainable() {
			if p.dw != nil {
				if err := ws.be.Fill(p.dw, 0); err != nil {
					ws.trainG = hostNewer // upload the zeros instead
					break
				}
			}
		}
	}
}

// moveToHost makes the host the home again; the host copies must be
// current (pull(true) first).
func (ws *weights) moveToHost() {
	ws.onBackend, ws.streamGrads = false, false
	ws.trainW, ws.trainG = inSync, inSync
	ws.hostGradsZero = false
}

// handOut gives the trainable host slices to a holder who will write
// them (an optimizer over Params): a home on the backend comes back to
// the host first.
func (ws *weights) handOut() []lm.Param {
	// An error here (a closed model) leaves the last host copy, which is
	// what there is.
	if ws.onBackend {
		_ = ws.pull(true)
		ws.moveToHost()
	} else {
		_ = ws.pull(false) // weights made on the backend (WithBackendInit)
	}
	ws.shared = true
	ws.hostGradsZero = false
	return ws.views()
}

// stepped records an optimizer step on the backend.
func (ws *weights) stepped() { ws.trainW = backendNewer }

// gradsWritten records that the backend's gradients changed (a backward
// with the home on the backend, zeroing, clipping).
func (ws *weights) gradsWritten() { ws.trainG = backendNewer }

// freezeBase freezes every base tensor for adapter (LoRA): their
// gradients are dropped, and the adapter becomes what trains.
func (ws *weights) freezeBase(adapter []*param) {
	for _, p := range ws.base {
		p.frozen = true
		p.grad = nil // the optimizer never sees the base weights again
		if p.dw != nil {
			_ = ws.be.Free(p.dw)
			p.dw = nil
		}
	}
	ws.adapter = adapter
	ws.hostWritten()
}

// gradBuffer allocates p's backend gradient (zero) when it has none.
func (ws *weights) gradBuffer(p *param) error {
	if p.dw != nil {
		return nil
	}
	var err error
	if p.dw, err = ws.be.Alloc(len(p.data)); err != nil {
		return fmt.Errorf("policy: allocating the gradient of %s: %w", p.spec.Name, err)
	}
	return nil
}

// uploadGrad copies p's host gradient to its backend buffer.
func (ws *weights) uploadGrad(p *param) error {
	if err := ws.gradBuffer(p); err != nil {
		return err
	}
	if err := ws.be.Upload(p.dw, 0, p.grad); err != nil {
		return fmt.Errorf("policy: uploading the gradient of %s: %w", p.spec.Name, err)
	}
	return nil
}

// prepareGrads readies the backend gradients for a backward: each
// trainable tensor gets a buffer; with the home on the host, a buffer
// left from an earlier pass is zeroed (the host accumulates, the
// backend's gradient is this pass's). Streamed gradients get theirs from
// the backward's gradFlow, layer by layer.
func (ws *weights) prepareGrads() error {
	for _, p := range ws.all() {
		if p.frozen || ws.streamGrads {
			continue // dw stays nil: the kernels skip a nil gradient
		}
		fresh := p.dw == nil
		if err := ws.gradBuffer(p); err != nil {
			return err
		}
		if !ws.onBackend && !fresh {
			if err := ws.be.Fill(p.dw, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishGrads ends a backward: with the home on the backend the
// gradients stay there; otherwise they are added into the host's.
func (ws *weights) finishGrads() error {
	if ws.onBackend {
		ws.gradsWritten()
		return nil
	}
	var host []float32
	for _, p := range ws.all() {
		if p.frozen {
			continue
		}
		if cap(host) < len(p.data) {
			host = make([]float32, len(p.data))
		}
		host = host[:len(p.data)]
		if err := ws.be.Download(host, p.dw, 0); err != nil {
			return err
		}
		for i, v := range host {
			p.grad[i] += v
		}
	}
	ws.hostGradsZero = false
	return nil
}

// streamGradients makes the trainable gradients streamed (home on the
// backend): their buffers are freed, and from now on each backward
// allocates and hands them over layer by layer (gradFlow). The host
// gradients are zeroed: the model holds none.
func (ws *weights) streamGradients() {
	ws.streamGrads = true
	for _, p := range ws.trainable() {
		if p.dw != nil {
			_ = ws.be.Free(p.dw)
			p.dw = nil
		}
		clear(p.grad)
	}
	ws.trainG = inSync
}
