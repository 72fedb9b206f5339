package advantage

import (
	"errors"
	"math"
	"testing"
)

// byteReader hands out bytes of the fuzz input, then zeros.
type byteReader struct{ b []byte }

func (r *byteReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// value maps a byte to a number, now and then a hostile one.
func (r *byteReader) value() float64 {
	switch c := r.next(); c {
	case 250:
		return math.NaN()
	case 251:
		return math.Inf(1)
	case 252:
		return 1e39 // finite in float64, overflows float32
	case 253:
		return -1e30
	default:
		return float64(int(c)-128) / 16
	}
}

// fuzzInput builds a batch from the fuzz bytes; a few header bits decide
// which optional fields are set.
func fuzzInput(data []byte) (Input, Config) {
	r := &byteReader{b: data}
	names := NewRegistry().Names()
	name := names[int(r.next())%len(names)]
	flags := r.next()
	b := int(r.next() % 9) // 0 exercises the empty batch
	in := Input{Mask: make([][]float32, b)}
	if b == 0 {
		in.Mask = nil
	}
	for i := range b {
		n := int(r.next() % 7)
		row := make([]float32, n)
		for t := range row {
			switch c := r.next(); {
			case c < 100:
				row[t] = 1
			case c == 255:
				row[t] = 0.5
			case c == 254:
				row[t] = float32(math.NaN())
			}
		}
		in.Mask[i] = row
	}
	perTraj := func() []float64 {
		xs := make([]float64, b)
		for i := range xs {
			xs[i] = r.value()
		}
		return xs
	}
	perToken := func() [][]float32 {
		rows := make([][]float32, b)
		for i := range rows {
			rows[i] = make([]float32, len(in.Mask[i]))
			for t := range rows[i] {
				rows[i][t] = float32(r.value())
			}
		}
		return rows
	}
	if flags&1 != 0 {
		in.Scores = perTraj()
	}
	if flags&2 != 0 {
		in.Groups = make([]string, b)
		for i := range in.Groups {
			in.Groups[i] = string(rune('a' + r.next()%4))
		}
	}
	if flags&4 != 0 {
		in.TokenRewards = perToken()
	}
	if flags&8 != 0 {
		in.Values = perToken()
	}
	if flags&16 != 0 {
		in.BaselineScores = perTraj()
	}
	if flags&128 != 0 {
		// Turns: spans that are often valid (ordered, within the row)
		// and sometimes not, hostile rewards, a few states, an empty
		// one now and then.
		in.Turns = make([][]Turn, b)
		for i := range in.Turns {
			at := 0
			for range int(r.next() % 4) {
				start := at + int(r.next()%3) - 1
				end := start + int(r.next()%4)
				state := string(rune('a' + r.next()%3))
				if state == "c" {
					state = ""
				}
				in.Turns[i] = append(in.Turns[i], Turn{Start: start, End: end, Reward: r.value(), State: state})
				at = end
			}
		}
	}
	cfg := Config{Estimator: name}
	if flags&32 != 0 {
		cfg.NormByStd = new(false)
	}
	if flags&64 != 0 {
		cfg.Gamma = new(float64(r.next()) / 200) // sometimes > 1
		cfg.Lambda = new(float64(r.next()) / 255)
	}
	return in, cfg
}

var sentinels = []error{
	ErrEmptyBatch, ErrLengthMismatch, ErrNonFinite, ErrMissingInput,
	ErrInvalidValue, ErrDegenerate,
}

// FuzzCompute checks that no input makes an estimator panic, that every
// failure wraps a documented sentinel, and that every success has the shape
// of the mask, finite values, and zero advantages on mask-0 tokens.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{3, 0xff, 4, 3, 1, 1, 1, 2, 1, 1, 0, 1, 2, 3, 4})
	f.Add([]byte{9, 0x1b, 2, 5, 0, 0, 200, 0, 0, 3, 0, 0, 0, 130, 120, 250})
	f.Add([]byte{7, 0x0b, 3, 0, 1, 0, 2, 0, 99, 252, 128, 1, 2})
	f.Add([]byte{2, 0x83, 2, 4, 1, 1, 1, 0, 3, 1, 1, 1, 130, 140, 2, 1, 1, 0, 0, 1, 2, 3, 1, 1, 1, 0, 200, 1, 1})
	f.Add([]byte{4, 0x83, 3, 3, 1, 0, 1, 2, 0, 1, 3, 1, 2, 1, 1, 150, 2, 1, 1, 1, 1, 250, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in, cfg := fuzzInput(data)
		name := cfg.Estimator
		out, err := Compute(cfg, in)
		if err != nil {
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("%s: error wraps no sentinel: %v", name, err)
		}
		if len(out.Advantages) != len(in.Mask) || len(out.Returns) != len(in.Mask) {
			t.Fatalf("%s: %d/%d rows for %d", name, len(out.Advantages), len(out.Returns), len(in.Mask))
		}
		for i, row := range in.Mask {
			if len(out.Advantages[i]) != len(row) || len(out.Returns[i]) != len(row) {
				t.Fatalf("%s: row %d has the wrong length", name, i)
			}
			for tok, m := range row {
				a, r := float64(out.Advantages[i][tok]), float64(out.Returns[i][tok])
				if math.IsNaN(a) || math.IsInf(a, 0) || math.IsNaN(r) || math.IsInf(r, 0) {
					t.Fatalf("%s: non-finite output at [%d][%d]: %v %v", name, i, tok, a, r)
				}
				if m == 0 && a != 0 {
					t.Fatalf("%s: advantage %v on a mask-0 token [%d][%d]", name, a, i, tok)
				}
			}
		}
	})
}
