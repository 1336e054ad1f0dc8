// Package inputerr holds the sentinel errors package input exports, so
// that its internal packages wrap the very values callers test for with
// errors.Is.
package inputerr
