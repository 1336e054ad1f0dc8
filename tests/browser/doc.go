// Package browser holds archenet's integration tests with players in
// headless Chromium (WebTransport, js/wasm): a page that predicts and
// converges beside a native player, the same snapshot bytes for a browser
// and a native watcher, and a hostile page against a match of native
// players. The page is tests/internal/pageclient, the game
// tests/internal/pagegame. The tests skip under the race detector and
// without chromium (unless CI is set). It has no code of its own outside its
// tests.
package browser
