package docs_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docCodeBlocks returns the code blocks of the doc comments in the Go files
// of dir: runs of indented comment lines that parse as Go statements or
// declarations (tables and wire layouts do not).
func docCodeBlocks(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			var block []string
			flush := func() {
				if len(block) > 0 && isGo(block) {
					key := fset.Position(cg.Pos()).String()
					out[key] = append([]string(nil), block...)
				}
				block = block[:0]
			}
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//\t") {
					block = append(block, strings.TrimPrefix(c.Text, "//\t"))
					continue
				}
				flush()
			}
			flush()
		}
	}
	return out
}

// isGo reports whether lines parse as Go statements or declarations.
func isGo(lines []string) bool {
	src := strings.ReplaceAll(strings.Join(lines, "\n"), "...", "") // (elisions)
	if _, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+src+"\n}", 0); err == nil {
		return true
	}
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+src, 0)
	return err == nil
}

// compiledLines returns every line of the module's Go files (tests and
// examples included), trimmed.
func compiledLines(t *testing.T) map[string]bool {
	t.Helper()
	lines := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil // (not compiled)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Comment text is not compiled code: blank it out.
		b := []byte(string(src))
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				s, e := fset.Position(c.Pos()).Offset, fset.Position(c.End()).Offset
				for i := s; i < e; i++ {
					if b[i] != '\n' {
						b[i] = ' '
					}
				}
			}
		}
		for _, l := range strings.Split(string(b), "\n") {
			lines[strings.TrimSpace(l)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// elided reports whether a code line with an elision ("f(func() { ... })")
// begins a compiled line: its part before the "..." does.
func elided(lines map[string]bool, code string) bool {
	i := strings.Index(code, "...")
	if i < 0 {
		return false
	}
	prefix := strings.TrimSpace(code[:i])
	for l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// Every code example in a package doc is compiled code: each of its lines
// (but "..." and comments) is a line of a compiled Go file of the module —
// an Example function, a test or an example program — so the docs cannot
// drift from the API.
func TestDocCodeIsCompiled(t *testing.T) {
	lines := compiledLines(t)
	for _, pkg := range DocumentedPackages {
		for pos, block := range docCodeBlocks(t, filepath.Join(root, filepath.FromSlash(pkg))) {
			for _, l := range block {
				code := strings.TrimSpace(l)
				if i := strings.Index(code, "//"); i >= 0 {
					code = strings.TrimSpace(code[:i])
				}
				if code == "" || code == "..." || code == "}" || code == "{" {
					continue
				}
				if !lines[code] && !elided(lines, code) {
					t.Errorf("%s: the doc's code line %q is not in any compiled file", pos, code)
				}
			}
		}
	}
}
