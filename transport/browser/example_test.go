//go:build !js

package browser_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/archenet/archenet/transport/browser"
)

// The server side: the page, the game's WebAssembly, wasm_exec.js, the
// endpoint document and both transports on one port pair. Give
// web.Listener() to replication.NewServer; the page calls browser.Dial.
func ExampleServe() {
	wasm := []byte("\x00asm\x01\x00\x00\x00") // (GOOS=js GOARCH=wasm go build …)
	web, err := browser.Serve(browser.Config{Wasm: wasm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer web.Close()
	for _, path := range []string{"", "main.wasm", "wasm_exec.js", "archenet.json"} {
		rsp, err := http.Get(web.URL() + path)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		fmt.Println("/"+path, rsp.StatusCode, strings.Split(rsp.Header.Get("Content-Type"), ";")[0], len(b) > 0)
	}
	// Output:
	// / 200 text/html true
	// /main.wasm 200 application/wasm true
	// /wasm_exec.js 200 text/javascript true
	// /archenet.json 200 application/json true
}
