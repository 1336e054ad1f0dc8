//go:build !js

package webtransporttest

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The helpers work outside a test's lifetime: a browser started by
// StartChromium keeps the page's console, and ServePages serves until closed.
func TestBrowserProgramHelpers(t *testing.T) {
	skipWithoutChromium(t) // as the other browser tests
	pages, err := ServePages(0, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`<!doctype html><script>console.log("hello", 42); setTimeout(() => { throw new Error("boom") })</script>`))
	}))
	require.NoError(t, err)
	defer pages.Close()
	b, err := StartChromium("")
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(b.Context(), chromedp.Navigate(pages.URL)))
	require.Eventually(t, func() bool { return len(b.Console()) >= 2 }, 30e9, 20e6)
	require.Equal(t, "console.log: \"hello\" 42", b.Console()[0])
	require.Contains(t, b.Console()[1], "exception: Uncaught")
	require.Contains(t, b.Console()[1], "boom")
	require.NoError(t, b.Close())
}
