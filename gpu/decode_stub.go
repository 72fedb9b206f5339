//go:build !agentrl_cuda || !cgo

package gpu

import "github.com/agentrl/agentrl/policy/backend"

var _ backend.Decoder = (*Backend)(nil)

// MemoryInfo returns ErrNotCompiled.
func (*Backend) MemoryInfo() (backend.MemoryInfo, error) { return backend.MemoryInfo{}, ErrNotCompiled }

// KVBlockBytes returns ErrNotCompiled.
func (*Backend) KVBlockBytes(backend.KVCacheSpec) (int64, error) { return 0, ErrNotCompiled }

// NewKVCache returns ErrNotCompiled.
func (*Backend) NewKVCache(backend.KVCacheSpec) (backend.KVCache, error) { return nil, ErrNotCompiled }

// FreeKVCache returns ErrNotCompiled.
func (*Backend) FreeKVCache(backend.KVCache) error { return ErrNotCompiled }

// CopyKVBlocks returns ErrNotCompiled.
func (*Backend) CopyKVBlocks(backend.KVCache, []int32, []int32) error { return ErrNotCompiled }

// PrepareStep returns ErrNotCompiled.
func (*Backend) PrepareStep(backend.KVCache, backend.PagedStep) (backend.PagedLayout, error) {
	return nil, ErrNotCompiled
}

// ReleaseStep returns ErrNotCompiled.
func (*Backend) ReleaseStep(backend.PagedLayout) error { return ErrNotCompiled }

// AppendKV returns ErrNotCompiled.
func (*Backend) AppendKV(backend.PagedLayout, int, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// PagedAttention returns ErrNotCompiled.
func (*Backend) PagedAttention(backend.PagedLayout, int, backend.Attention, backend.Buffer, backend.Buffer) error {
	return ErrNotCompiled
}

// SampleRows returns ErrNotCompiled.
func (*Backend) SampleRows(backend.Buffer, int, []backend.SampleRow, []backend.SampleResult) error {
	return ErrNotCompiled
}
