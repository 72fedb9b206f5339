package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

// Tensor is one tensor to write: its values come from Float32, converted
// to DType (F32, BF16 or F16), from Raw, the little-endian bytes of any
// dtype, or from Fill, called only when the tensor is written. Exactly one
// of them is set unless the tensor has no elements.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	// Float32 holds the values in row-major order.
	Float32 []float32
	// Raw holds the encoded bytes, when Float32 is nil.
	Raw []byte
	// Fill, when Float32 and Raw are nil, supplies the values (converted
	// to DType, which is F32, BF16 or F16) as the tensor is written: it is
	// called once, in data order, with dst of the tensor's element count
	// to fill row-major. The writers call one Fill at a time and reuse
	// dst, so that writing a model whose tensors are read from elsewhere
	// holds one tensor's values at a time, not the model's. Its error
	// stops the write and is returned wrapped, naming the tensor.
	Fill func(dst []float32) error
}

// ErrWrite marks tensors that cannot be written as given.
var ErrWrite = errors.New("safetensors: cannot write")

func (t *Tensor) byteSize() (int64, error) {
	if t.Name == "" {
		return 0, fmt.Errorf("%w: empty tensor name", ErrWrite)
	}
	if t.Name == metadataKey {
		return 0, fmt.Errorf("%w: tensor name %q is reserved", ErrWrite, metadataKey)
	}
	if !t.DType.Valid() {
		return 0, fmt.Errorf("%w: tensor %q: dtype %q", ErrUnsupportedDType, t.Name, t.DType)
	}
	n := int64(1)
	for i, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: tensor %q: shape[%d] = %d is negative", ErrWrite, t.Name, i, d)
		}
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("%w: tensor %q: shape %v overflows", ErrWrite, t.Name, t.Shape)
		}
		n *= int64(d)
	}
	switch {
	case t.Float32 != nil && t.Raw != nil:
		return 0, fmt.Errorf("%w: tensor %q sets both Float32 and Raw", ErrWrite, t.Name)
	case t.Fill != nil && (t.Float32 != nil || t.Raw != nil):
		return 0, fmt.Errorf("%w: tensor %q sets Fill and Float32 or Raw", ErrWrite, t.Name)
	case t.Float32 != nil || t.Fill != nil || (t.Raw == nil && n == 0):
		if t.DType != F32 && t.DType != BF16 && t.DType != F16 {
			if n == 0 {
				return 0, nil
			}
			return 0, fmt.Errorf("%w: tensor %q: float32 values convert only to F32, BF16 or F16, not %s", ErrUnsupportedDType, t.Name, t.DType)
		}
		if t.Fill == nil && int64(len(t.Float32)) != n {
			return 0, fmt.Errorf("%w: tensor %q: shape %v has %d elements, Float32 holds %d", ErrWrite, t.Name, t.Shape, n, len(t.Float32))
		}
	default:
		if int64(len(t.Raw)) != n*int64(t.DType.Size()) {
			return 0, fmt.Errorf("%w: tensor %q: shape %v of %s needs %d bytes, Raw holds %d", ErrWrite, t.Name, t.Shape, t.DType, n*int64(t.DType.Size()), len(t.Raw))
		}
	}
	return n * int64(t.DType.Size()), nil
}

// Write writes tensors and optional metadata in the safetensors format.
//
// Like the reference implementation (safetensors/src/tensor.rs, prepare),
// it orders the data by element size, largest first, then by name, so that
// every tensor starts at a multiple of its element size, and pads the
// header with spaces to a multiple of 8 bytes. The output depends only on
// the set of tensors, not on their order in the slice. The header is
// computed from the names, dtypes and shapes before any data is written;
// a Fill that fails leaves w with part of the file (WriteFile leaves
// none).
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	lay, err := buildHeader(tensors, metadata)
	if err != nil {
		return err
	}
	if err := newStreamer(tensors).write(w, tensors, lay); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// streamer writes the data of safetensors files through buffers that it
// reuses from tensor to tensor and file to file: a write buffer, a chunk
// of encoded values, and the values of one Fill tensor, so that writing
// holds one tensor at a time (plus 1.25 MiB) beyond what the caller
// holds.
type streamer struct {
	bw    *bufio.Writer
	chunk []byte
	// vals is made on the first Fill, of the largest Fill tensor's
	// element count.
	vals    []float32
	maxFill int64
}

// newStreamer returns a streamer for files of (some of) tensors, which
// are valid (buildHeader).
func newStreamer(tensors []Tensor) *streamer {
	s := &streamer{}
	for i := range tensors {
		if t := &tensors[i]; t.Fill != nil {
			n, _ := t.byteSize()
			s.maxFill = max(s.maxFill, n/int64(t.DType.Size()))
		}
	}
	return s
}

// write writes one file of tensors, laid out by buildHeader, to w.
func (s *streamer) write(w io.Writer, tensors []Tensor, lay layout) error {
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(w, 1<<20)
	} else {
		s.bw.Reset(w)
	}
	bw := s.bw
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(lay.header)))
	bw.Write(lenBuf[:])
	bw.Write(lay.header)
	for _, i := range lay.order {
		t := &tensors[i]
		vals := t.Float32
		switch {
		case t.Fill != nil:
			if s.vals == nil {
				s.vals = make([]float32, s.maxFill)
			}
			vals = s.vals[:lay.sizes[i]/int64(t.DType.Size())]
			if err := t.Fill(vals); err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
		case t.Float32 == nil:
			if _, err := bw.Write(t.Raw); err != nil {
				return err
			}
			continue
		}
		if s.chunk == nil {
			s.chunk = make([]byte, chunkBytes)
		}
		es := t.DType.Size()
		for len(vals) > 0 {
			n := min(len(vals), len(s.chunk)/es)
			encodeFloat32(t.DType, vals[:n], s.chunk)
			if _, err := bw.Write(s.chunk[:n*es]); err != nil {
				return err
			}
			vals = vals[n:]
		}
	}
	err := bw.Flush()
	bw.Reset(nil) // let w go
	return err
}

func encodeFloat32(dt DType, src []float32, dst []byte) {
	switch dt {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToF16(v))
		}
	}
}

// layout is a file's layout, computed from the tensors' names, dtypes
// and shapes alone: the indices of the tensors in data order, the padded
// JSON header and each tensor's data bytes.
type layout struct {
	order  []int
	header []byte
	sizes  []int64
}

// buildHeader validates the tensors and returns their layout.
func buildHeader(tensors []Tensor, metadata map[string]string) (layout, error) {
	sizes := make([]int64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i := range tensors {
		n, err := tensors[i].byteSize()
		if err != nil {
			return layout{}, err
		}
		if seen[tensors[i].Name] {
			return layout{}, fmt.Errorf("%w: duplicate tensor name %q", ErrWrite, tensors[i].Name)
		}
		seen[tensors[i].Name] = true
		sizes[i] = n
	}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ta, tb := &tensors[order[a]], &tensors[order[b]]
		if sa, sb := ta.DType.Size(), tb.DType.Size(); sa != sb {
			return sa > sb
		}
		return ta.Name < tb.Name
	})
	var h bytes.Buffer
	h.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		writeJSONString(&h, metadataKey)
		h.WriteString(":{")
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeJSONString(&h, k)
			h.WriteByte(':')
			writeJSONString(&h, metadata[k])
		}
		h.WriteByte('}')
	}
	var off int64
	for j, i := range order {
		if j > 0 || len(metadata) > 0 {
			h.WriteByte(',')
		}
		t := &tensors[i]
		writeJSONString(&h, t.Name)
		h.WriteString(`:{"dtype":`)
		writeJSONString(&h, string(t.DType))
		h.WriteString(`,"shape":[`)
		for k, d := range t.Shape {
			if k > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteByte(',')
		off += sizes[i]
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteString("]}")
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	if h.Len() > MaxHeaderSize {
		return layout{}, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrWrite, h.Len(), MaxHeaderSize)
	}
	return layout{order, h.Bytes(), sizes}, nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// WriteFile writes tensors to path atomically and durably: into a
// temporary file in the same directory, fsynced and renamed over path once
// complete, then the directory fsynced. The file has mode 0644, as
// config.json and the files of HF's save_pretrained, so that an inference
// server running as another user can load a published checkpoint.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	lay, err := buildHeader(tensors, metadata)
	if err != nil {
		return err
	}
	s := newStreamer(tensors)
	return writeAtomic(path, func(w io.Writer) error { return s.write(w, tensors, lay) })
}

// writeAtomic replaces path with what write writes (internal/atomicfile),
// with the mode WriteFile documents.
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, 0o644, write); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
