// Package internal and its subpackages hold code that users of agentrl must
// not import: CPU kernels and numerics helpers shared by the public
// packages.
package internal
