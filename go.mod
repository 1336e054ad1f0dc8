module github.com/archenet/archenet

go 1.26.0

require (
	github.com/chromedp/cdproto v0.159.0 // tests: the browser's console
	github.com/chromedp/chromedp v0.23.0 // tests: headless Chromium
	github.com/klauspost/compress v1.20.4
	github.com/mlange-42/arche v0.15.3
	// quic-go stays at v0.64.1: github.com/quic-go/webtransport-go v0.13.0 (the browser
	// transport) does not build on v0.65.0, whose http3.HTTPStreamer changed.
	github.com/quic-go/quic-go v0.64.1
	github.com/quic-go/webtransport-go v0.13.0 // browser players (transport/webtransport)
	github.com/stretchr/testify v1.12.1
	golang.org/x/crypto v0.54.0
)

require github.com/coder/websocket v1.8.15

require (
	github.com/dunglas/httpsfv v1.1.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
)
