// Package quickselect finds order statistics in expected linear time, for
// the samplers' top-k (package policy's TokenSampler and package
// backend's HostSampler) without sorting a whole vocabulary.
package quickselect

import "cmp"

// KthLargest returns the k-th largest value (1-based, 1 ≤ k ≤ len(v)) of
// v, reordering v (Hoare's quickselect with a middle pivot, expected
// linear time). Ties count once each: among {3, 3, 1} the second largest
// is 3.
func KthLargest[T cmp.Ordered](v []T, k int) T {
	lo, hi, target := 0, len(v)-1, k-1
	for lo < hi {
		pivot := v[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for v[i] > pivot {
				i++
			}
			for v[j] < pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case target <= j:
			hi = j
		case target >= i:
			lo = i
		default:
			return v[target]
		}
	}
	return v[target]
}
