package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCollect(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		p := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	write("a/a.go", `package a
type T struct{ X, y int }
type u struct{ Z int }
type I interface{ M() }
func (T) Exported()   {}
func (*T) hidden()    {}
func (u) Method()     {}
func F()              {}
const C, d = 1, 2
var V int
`)
	write("a/a_js.go", "package a\nfunc (T) Exported() {}\nfunc F() {}\n") // (a js variant counts once)
	write("a/a_test.go", "package a\nfunc TestX() {}\n")
	write("a/internal/b/b.go", "package b\nfunc G() {}\n")
	write("examples/e/e.go", "package e\nfunc H() {}\n")
	write("cmd/main.go", "package main\nfunc K() {}\n")

	ids, err := collect(root, false)
	require.NoError(t, err)
	var got []string
	for _, id := range ids {
		got = append(got, id.String())
	}
	require.ElementsMatch(t, []string{"a T", "a I", "a T.Exported", "a F", "a C", "a V"}, got)

	ids, err = collect(root, true)
	require.NoError(t, err)
	require.Len(t, ids, 8, "plus T.X and I.M")
}
