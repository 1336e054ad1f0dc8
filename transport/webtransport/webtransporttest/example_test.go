//go:build !js

package webtransporttest_test

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/chromedp/chromedp"

	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
)

// A game's own check program (not a test): build the page, serve it, open it in
// headless Chromium and read what it publishes.
func Example_program() {
	dir, err := os.MkdirTemp("", "page")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	wasm := filepath.Join(dir, "main.wasm")
	if err := webtransporttest.Build("", "./examples/webgame", wasm, "-trimpath", "-ldflags=-s -w"); err != nil {
		log.Fatal(err)
	}
	h, err := webtransporttest.NewWasmHandler(wasm, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(webtransporttest.RunPage))
	}))
	if err != nil {
		log.Fatal(err)
	}
	pages, err := webtransporttest.ServePages(0, h)
	if err != nil {
		log.Fatal(err)
	}
	defer pages.Close()
	b, err := webtransporttest.StartChromium("")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := chromedp.Do(b.Context(), chromedp.Navigate(pages.URL)); err != nil {
		log.Fatal(err)
	}
	state, err := chromedp.Run(b.Context(), chromedp.Evaluate[string](`String(window.webgame || "")`))
	fmt.Println(state, err, b.Console())
}
