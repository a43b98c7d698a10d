// Command apisize measures the size of a Go package's API and of its
// largest function, for the record issue 15 asks for (docs/api.md):
// exported top-level names, the same with exported methods and struct
// fields, and the longest function or method, in lines.
//
//	cd bench && go run ./apisize ..          # the root package
//	go doc -all .. | wc -l; wc -l ../README.md   # the other two figures
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// size is what apisize reports of a package.
type size struct {
	topLevel    int    // exported constants, variables, functions and types
	withMembers int    // those, exported methods and exported struct fields
	largest     string // the longest function, as name
	largestLen  int    // and its length in lines
}

func measure(dir string) (size, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return size{}, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return size{}, err
		}
		files = append(files, f)
	}
	var s size
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if n := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1; n > s.largestLen {
					s.largest, s.largestLen = d.Name.Name, n
				}
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					s.topLevel++
				}
				s.withMembers++
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, id := range spec.Names {
							if id.IsExported() {
								s.topLevel++
								s.withMembers++
							}
						}
					case *ast.TypeSpec:
						if !spec.Name.IsExported() {
							continue
						}
						s.topLevel++
						s.withMembers++
						if st, ok := spec.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, id := range fld.Names {
									if id.IsExported() {
										s.withMembers++
									}
								}
							}
						}
						if it, ok := spec.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, id := range m.Names {
									if id.IsExported() {
										s.withMembers++
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return s, nil
}

func main() {
	flag.Parse()
	dir := flag.Arg(0)
	if dir == "" {
		dir = ".."
	}
	s, err := measure(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apisize:", err)
		os.Exit(1)
	}
	fmt.Printf("exported top-level names: %d\nwith methods and fields: %d\nlargest function: %s, %d lines\n",
		s.topLevel, s.withMembers, s.largest, s.largestLen)
}
