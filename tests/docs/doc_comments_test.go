package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocumentedPackages are the packages (directories relative to the module root)
// whose exported identifiers must all carry a doc comment.
var DocumentedPackages = []string{
	"transport",
	"transport/quic",
	"transport/sim",
	"transport/netem",
	"transport/transporttest",
	"transport/webtransport",
	"transport/webtransport/webtransporttest",
	"components",
	"ecs",
	"replication/internal/entity",
	"replication/internal/wire",
	"replication/internal/codec",
	"replication/internal/store",
	"replication/internal/baseline",
	"replication/internal/encode",
	"replication/internal/lanes",
	"replication/internal/capture",
	"replication/internal/admit",
	"replication/internal/clampwatch",
	"replication/internal/receive",
	"replication/internal/link",
	"replication/internal/mirror",
	"replication/internal/watch",
	"replication/internal/congestion",
	"replication/internal/peer",
	"replication/internal/grid",
	"replication/internal/gang",
	"replication/internal/slots",
	"replication/bitio",
	"replication/timing",
	"replication/internal/quant",
	"replication/replicationtest",
	"replication",
	"replication/schema",
	"replication/lagcomp",
	"replication/debugview",
	"replication/host",
	"replication/host/token",
	"replication/host/agones",
	"replication/host/agones/agonestest",
	"input",
	"input/internal/inputerr",
	"input/internal/frames",
	"input/internal/inputlog",
	"input/internal/predict",
	"interp",
}

// TestExportedIdentifiersDocumented fails for every exported top-level identifier of
// DocumentedPackages without a doc comment: types, functions, methods on exported
// types, and constants and variables (the doc comment of a const or var block counts
// for its members; a trailing line comment does not). Test files are skipped.
func TestExportedIdentifiersDocumented(t *testing.T) {
	for _, pkg := range DocumentedPackages {
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		fset := token.NewFileSet()
		files := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("%s: %v", pkg, err)
			}
			files++
			for _, u := range undocumented(f) {
				t.Errorf("%s: %s has no doc comment", fset.Position(u.Pos()), u.Name)
			}
		}
		if files == 0 {
			t.Errorf("%s: no Go files", pkg)
		}
	}
}

// undocumented returns the exported top-level identifiers of f without a doc comment.
func undocumented(f *ast.File) []*ast.Ident {
	var out []*ast.Ident
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && receiverExported(d) && d.Doc == nil {
				out = append(out, d.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
						out = append(out, s.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && d.Doc == nil && s.Doc == nil {
							out = append(out, n)
						}
					}
				}
			}
		}
	}
	return out
}

// receiverExported reports whether d is a function, or a method on an exported type
// (methods of unexported types are not in the documentation).
func receiverExported(d *ast.FuncDecl) bool {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return true
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return true
		}
	}
}
