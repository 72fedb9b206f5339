// Package tooltest provides a scripted Tool and helpers for testing
// pipelines that call tools, in the manner of net/http/httptest.
//
// tooltest is for tests; production code must not import it.
package tooltest
