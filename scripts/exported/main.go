// Command exported counts the module's exported identifiers: the public
// surface a user of archenet sees. It counts, per package, the exported
// top-level functions, types, constants and variables and the exported
// methods of exported types, each once (a declaration with js/wasm and
// native variants counts once); -fields adds the exported fields of
// exported structs and the methods of exported interfaces. Packages under
// internal/, testdata/, examples/, tests/ and scripts/, test files and
// commands are not counted.
//
//	go run ./scripts/exported          # per package, then the total
//	go run ./scripts/exported -v       # every identifier
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	fields := flag.Bool("fields", false, "also count exported struct fields and interface methods")
	verbose := flag.Bool("v", false, "print every identifier")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	ids, err := collect(root, *fields)
	if err != nil {
		fmt.Fprintln(os.Stderr, "exported:", err)
		os.Exit(1)
	}
	per := map[string]int{}
	for _, id := range ids {
		per[id.pkg]++
		if *verbose {
			fmt.Println(id)
		}
	}
	pkgs := make([]string, 0, len(per))
	for p := range per {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool {
		return per[pkgs[i]] > per[pkgs[j]] || per[pkgs[i]] == per[pkgs[j]] && pkgs[i] < pkgs[j]
	})
	for _, p := range pkgs {
		fmt.Printf("%5d %s\n", per[p], p)
	}
	fmt.Printf("%5d total\n", len(ids))
}

// ident is one exported identifier: its package directory, the type it
// belongs to (methods, fields; empty for top-level ones) and its name.
type ident struct{ pkg, owner, name string }

func (i ident) String() string {
	if i.owner != "" {
		return i.pkg + " " + i.owner + "." + i.name
	}
	return i.pkg + " " + i.name
}

// skipDirs are the directories whose packages are not the public surface.
var skipDirs = map[string]bool{"internal": true, "testdata": true, "examples": true, "tests": true, "scripts": true}

func collect(root string, fields bool) ([]ident, error) {
	seen := map[ident]bool{}
	var ids []ident
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		add := func(owner, name string) {
			id := ident{filepath.ToSlash(dir), owner, name}
			if ast.IsExported(name) && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					add("", decl.Name.Name)
				} else if owner := recvType(decl.Recv.List[0].Type); ast.IsExported(owner) {
					add(owner, decl.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						add("", spec.Name.Name)
						if fields && ast.IsExported(spec.Name.Name) {
							members(spec, func(n string) { add(spec.Name.Name, n) })
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							add("", n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	return ids, err
}

// recvType returns the name of a method receiver's type.
func recvType(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// members calls add with the field names of a struct type and the method
// names of an interface type.
func members(spec *ast.TypeSpec, add func(string)) {
	var list *ast.FieldList
	switch t := spec.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return
	}
	for _, fl := range list.List {
		for _, n := range fl.Names {
			add(n.Name)
		}
	}
}
