package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"sort"
	"unicode/utf8"
	"unsafe"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation
// does (safetensors/src/tensor.rs, MAX_HEADER_SIZE = 100 000 000 bytes).
const MaxHeaderSize = 100_000_000

// metadataKey is the reserved header key of the free-form string metadata.
const metadataKey = "__metadata__"

// Errors callers may branch on with errors.Is. Every error the reader
// returns wraps ErrInvalid or ErrUnsupportedDType, or comes from I/O.
var (
	// ErrInvalid marks a file that is not valid safetensors.
	ErrInvalid = errors.New("safetensors: invalid file")
	// ErrUnsupportedDType marks a dtype this package does not know, or a
	// conversion it does not do (for example I64 to float32).
	ErrUnsupportedDType = errors.New("safetensors: unsupported dtype")
	// ErrNotFound marks a tensor name that is not in the file.
	ErrNotFound = errors.New("safetensors: tensor not found")
)

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	DType DType
	// Shape is the tensor's shape; empty for a scalar.
	Shape []int
	// Offset is the absolute byte offset of the data in the file, and
	// Size its length in bytes.
	Offset, Size int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an opened safetensors file whose header has been validated.
// Tensor data is read on demand. A File is safe for concurrent reads.
type File struct {
	r        io.ReaderAt
	closer   io.Closer
	tensors  []TensorInfo // in data order
	byName   map[string]int
	metadata map[string]string
}

// Open opens the safetensors file at path and validates its header.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	sf, err := NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf.closer = f
	return sf, nil
}

// NewReader reads and validates the header of the safetensors data held by r,
// which is size bytes long. Only the header is read now.
func NewReader(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrInvalid, size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: reading header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header length %d exceeds the limit %d", ErrInvalid, n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("%w: header length %d exceeds the %d bytes after the length field", ErrInvalid, n, size-8)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("safetensors: reading header: %w", err)
	}
	dataStart := 8 + int64(n)
	tensors, meta, err := parseHeader(header, size-dataStart)
	if err != nil {
		return nil, err
	}
	f := &File{r: r, tensors: tensors, metadata: meta, byName: make(map[string]int, len(tensors))}
	for i := range f.tensors {
		f.tensors[i].Offset += dataStart
		f.byName[f.tensors[i].Name] = i
	}
	return f, nil
}

// rawInfo is one tensor entry of the header as written.
type rawInfo struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// parseHeader validates the JSON header and returns the tensors sorted by
// offset (relative to the data section, dataLen bytes long) and the
// metadata.
func parseHeader(header []byte, dataLen int64) ([]TensorInfo, map[string]string, error) {
	if len(header) == 0 || header[0] != '{' {
		return nil, nil, fmt.Errorf("%w: header does not start with '{'", ErrInvalid)
	}
	if !utf8.Valid(header) {
		return nil, nil, fmt.Errorf("%w: header is not valid UTF-8", ErrInvalid)
	}
	entries, err := objectEntries(header)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: header: %w", ErrInvalid, err)
	}
	var meta map[string]string
	tensors := make([]TensorInfo, 0, len(entries))
	type span struct{ begin, end int64 }
	spans := make([]span, 0, len(entries))
	for _, e := range entries {
		if e.key == metadataKey {
			if string(e.value) == "null" { // the reference reader accepts a null metadata
				continue
			}
			if meta, err = parseMetadata(e.value); err != nil {
				return nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalid, metadataKey, err)
			}
			continue
		}
		t, b, end, err := parseTensorInfo(e.key, e.value)
		if err != nil {
			if errors.Is(err, ErrUnsupportedDType) {
				return nil, nil, fmt.Errorf("%w (tensor %q)", err, e.key)
			}
			return nil, nil, fmt.Errorf("%w: tensor %q: %w", ErrInvalid, e.key, err)
		}
		tensors = append(tensors, t)
		spans = append(spans, span{b, end})
	}
	// Sort by offset and require the spans to tile [0, dataLen) exactly,
	// as the reference implementation does (Metadata::validate).
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := spans[order[a]], spans[order[b]]
		if sa.begin != sb.begin {
			return sa.begin < sb.begin
		}
		return sa.end < sb.end
	})
	sorted := make([]TensorInfo, len(tensors))
	var end int64
	for i, k := range order {
		s := spans[k]
		if s.begin != end {
			if s.begin < end {
				return nil, nil, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] overlap the previous tensor, which ends at %d", ErrInvalid, tensors[k].Name, s.begin, s.end, end)
			}
			return nil, nil, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] leave a gap after byte %d", ErrInvalid, tensors[k].Name, s.begin, s.end, end)
		}
		end = s.end
		t := tensors[k]
		t.Offset = s.begin
		sorted[i] = t
	}
	if end != dataLen {
		return nil, nil, fmt.Errorf("%w: tensors cover %d data bytes but the file holds %d", ErrInvalid, end, dataLen)
	}
	return sorted, meta, nil
}

func parseTensorInfo(name string, raw json.RawMessage) (TensorInfo, int64, int64, error) {
	if name == "" {
		return TensorInfo{}, 0, 0, errors.New("empty tensor name")
	}
	if _, err := objectEntries(raw); err != nil {
		return TensorInfo{}, 0, 0, err
	}
	var ri rawInfo
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ri); err != nil {
		return TensorInfo{}, 0, 0, err
	}
	switch {
	case ri.DType == nil:
		return TensorInfo{}, 0, 0, errors.New(`missing field "dtype"`)
	case ri.Shape == nil:
		return TensorInfo{}, 0, 0, errors.New(`missing field "shape"`)
	case ri.DataOffsets == nil:
		return TensorInfo{}, 0, 0, errors.New(`missing field "data_offsets"`)
	}
	dt, err := parseDType(*ri.DType)
	if err != nil {
		return TensorInfo{}, 0, 0, err
	}
	offs := *ri.DataOffsets
	if len(offs) != 2 {
		return TensorInfo{}, 0, 0, fmt.Errorf("data_offsets has %d values, want 2", len(offs))
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return TensorInfo{}, 0, 0, fmt.Errorf("data_offsets [%d, %d] are not an ordered pair of non-negative offsets", begin, end)
	}
	shape := make([]int, len(*ri.Shape))
	numel := uint64(1)
	for i, d := range *ri.Shape {
		if d < 0 {
			return TensorInfo{}, 0, 0, fmt.Errorf("shape[%d] = %d is negative", i, d)
		}
		hi, lo := bits.Mul64(numel, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, 0, 0, fmt.Errorf("shape %v: element count overflows", *ri.Shape)
		}
		numel = lo
		shape[i] = int(d)
	}
	hi, nbytes := bits.Mul64(numel, uint64(dt.Size()))
	if hi != 0 || nbytes > math.MaxInt64 {
		return TensorInfo{}, 0, 0, fmt.Errorf("shape %v of %s: byte length overflows", *ri.Shape, dt)
	}
	if uint64(end-begin) != nbytes {
		return TensorInfo{}, 0, 0, fmt.Errorf("data_offsets [%d, %d] span %d bytes, but shape %v of %s needs %d", begin, end, end-begin, *ri.Shape, dt, nbytes)
	}
	return TensorInfo{Name: name, DType: dt, Shape: shape, Size: end - begin}, begin, end, nil
}

func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	entries, err := objectEntries(raw)
	if err != nil {
		return nil, err
	}
	meta := make(map[string]string, len(entries))
	for _, e := range entries {
		var s string
		if len(e.value) == 0 || e.value[0] != '"' {
			return nil, fmt.Errorf("value of %q is not a string", e.key)
		}
		if err := json.Unmarshal(e.value, &s); err != nil {
			return nil, fmt.Errorf("value of %q: %w", e.key, err)
		}
		meta[e.key] = s
	}
	return meta, nil
}

type entry struct {
	key   string
	value json.RawMessage
}

// objectEntries decodes a JSON object into its entries in order, rejecting
// duplicate keys and anything after the closing brace but whitespace
// (encoding/json would silently keep the last of two equal keys).
func objectEntries(data []byte) ([]entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []entry
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is %v, not a string", tok)
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("value of %q: %w", key, err)
		}
		out = append(out, entry{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, errors.New("data after the JSON object")
		}
		return nil, err
	}
	return out, nil
}

// Tensors lists the tensors in the order of their data in the file. The
// slice is a copy; its Shape slices are shared and must not be modified.
func (f *File) Tensors() []TensorInfo {
	return append([]TensorInfo(nil), f.tensors...)
}

// Info returns the description of the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// Metadata returns a copy of the header's __metadata__ (nil when absent).
func (f *File) Metadata() map[string]string {
	if f.metadata == nil {
		return nil
	}
	m := make(map[string]string, len(f.metadata))
	for k, v := range f.metadata {
		m[k] = v
	}
	return m
}

func (f *File) info(name string) (TensorInfo, error) {
	t, ok := f.Info(name)
	if !ok {
		return TensorInfo{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return t, nil
}

// Section returns a reader over the raw little-endian bytes of the named
// tensor.
func (f *File) Section(name string) (*io.SectionReader, error) {
	t, err := f.info(name)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(f.r, t.Offset, t.Size), nil
}

// Raw returns the raw little-endian bytes of the named tensor, whatever its
// dtype.
func (f *File) Raw(name string) ([]byte, error) {
	t, err := f.info(name)
	if err != nil {
		return nil, err
	}
	if t.Size > math.MaxInt {
		return nil, fmt.Errorf("safetensors: tensor %q: %d bytes do not fit in memory", name, t.Size)
	}
	buf := make([]byte, t.Size)
	if t.Size == 0 {
		return buf, nil // ReadAt at the end of the data may report io.EOF
	}
	if _, err := f.r.ReadAt(buf, t.Offset); err != nil {
		return nil, fmt.Errorf("safetensors: reading tensor %q: %w", name, err)
	}
	return buf, nil
}

// Float32 reads the named F32, F16 or BF16 tensor and converts it to
// float32, exactly.
func (f *File) Float32(name string) ([]float32, error) {
	t, err := f.info(name)
	if err != nil {
		return nil, err
	}
	if !t.DType.IsFloat32Convertible() {
		return nil, fmt.Errorf("%w: tensor %q is %s, not F32, F16 or BF16", ErrUnsupportedDType, name, t.DType)
	}
	dst := make([]float32, t.NumElements())
	return dst, f.readFloat32(t, dst)
}

// ReadFloat32 reads the named F32, F16 or BF16 tensor into dst, which must
// hold exactly its element count. It reads in bounded chunks, so it needs
// no buffer the size of the tensor.
func (f *File) ReadFloat32(name string, dst []float32) error {
	t, err := f.info(name)
	if err != nil {
		return err
	}
	if !t.DType.IsFloat32Convertible() {
		return fmt.Errorf("%w: tensor %q is %s, not F32, F16 or BF16", ErrUnsupportedDType, name, t.DType)
	}
	if n := t.NumElements(); len(dst) != n {
		return fmt.Errorf("safetensors: tensor %q has %d elements, destination holds %d", name, n, len(dst))
	}
	return f.readFloat32(t, dst)
}

// nativeLittleEndian reports whether float32 values are stored
// little-endian in memory, as in safetensors files.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// chunkBytes is the read size of ReadFloat32: large enough to amortise a
// system call, small enough to stay in cache.
const chunkBytes = 1 << 18

func (f *File) readFloat32(t TensorInfo, dst []float32) error {
	if t.DType == F32 && nativeLittleEndian && len(dst) > 0 {
		// The file's bytes are the float32 values in memory order: read
		// them straight into dst.
		b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst))
		if _, err := f.r.ReadAt(b, t.Offset); err != nil {
			return fmt.Errorf("safetensors: reading tensor %q: %w", t.Name, err)
		}
		return nil
	}
	es := t.DType.Size()
	buf := make([]byte, min(int64(chunkBytes), t.Size))
	off := t.Offset
	for i := 0; i < len(dst); {
		n := min(len(dst)-i, len(buf)/es)
		b := buf[:n*es]
		if _, err := f.r.ReadAt(b, off); err != nil {
			return fmt.Errorf("safetensors: reading tensor %q at byte %d: %w", t.Name, off, err)
		}
		decodeFloat32(t.DType, b, dst[i:i+n])
		i += n
		off += int64(len(b))
	}
	return nil
}

func decodeFloat32(dt DType, src []byte, dst []float32) {
	switch dt {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
}

// Close closes the underlying file when the File came from Open; it does
// nothing for one made by NewReader.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer.Close()
	f.closer = nil
	return err
}
