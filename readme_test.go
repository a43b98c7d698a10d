package retry_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// readmeImports are the packages a README block may use without importing
// them, by the name it uses.
var readmeImports = map[string]string{
	"awsretry": "github.com/backoff-jitter/retry/awsretry",
	"atomic":   "sync/atomic",
	"breaker":  "github.com/backoff-jitter/retry/breaker",
	"bytes":    "bytes",
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"http":     "net/http",
	"httptest": "net/http/httptest",
	"io":       "io",
	"json":     "encoding/json",
	"log":      "log",
	"os":       "os",
	"pace":     "github.com/backoff-jitter/retry/pace",
	"rand":     "crypto/rand",
	"retry":    "github.com/backoff-jitter/retry",
	"slog":     "log/slog",
	"strings":  "strings",
	"sync":     "sync",
	"time":     "time",
}

// codeBlock is a fenced ```go block of a Markdown file.
type codeBlock struct {
	line int // of its first line of code
	code string
}

// goBlocks returns the ```go blocks of the Markdown file name.
func goBlocks(t *testing.T, name string) []codeBlock {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []codeBlock
		cur    *codeBlock
		lines  []string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur, lines = &codeBlock{line: n + 1}, nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = strings.Join(lines, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a ```go block is not closed", name, cur.line-1)
	}
	return blocks
}

// exampleSources returns the text of the non-test Go files under
// examples/, and of the Go files of otelretry and redispace, whose tests
// build the blocks that need OpenTelemetry and oauth2, or Redis (nested
// modules, all).
func exampleSources(t *testing.T) map[string]string {
	t.Helper()
	srcs := map[string]string{}
	for _, dir := range []string{"examples", "otelretry", "redispace"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			if dir == "examples" && strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			srcs[path] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return srcs
}

// TestREADMECodeBlocks checks that every Go block of README.md and of the
// Markdown files in docs/ compiles.
// A block is either found verbatim in a program under examples/ (the
// blocks that use the AWS SDK, which lives in the nested module
// examples/route53 and not in this one), whose own build and tests check
// it, or type-checked here with go/types against the source of the
// packages it uses: a block that is not a whole file is put in a file of
// its own, as declarations or else as the body of a function, with the
// imports of the package names it uses (readmeImports). Variables a block
// declares and does not use are allowed; every other error fails.
func TestREADMECodeBlocks(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := exampleSources(t)
	fset, imp := sourceImporter()
	total := 0
	for _, name := range append([]string{"README.md"}, docs...) {
		blocks := goBlocks(t, name)
		total += len(blocks)
		for _, b := range blocks {
			t.Run(fmt.Sprintf("%s:%d", name, b.line), func(t *testing.T) {
				for path, src := range examples {
					if strings.Contains(src, b.code) {
						t.Logf("found verbatim in %s", path)
						return
					}
				}
				src, err := wrapBlock(name, b)
				if err != nil {
					t.Fatalf("%s:%d: %v", name, b.line, err)
				}
				if errs := typeCheck(fset, imp, src); len(errs) > 0 {
					t.Errorf("%s:%d: the block does not compile:\n%v", name, b.line, errors.Join(errs...))
				}
			})
		}
	}
	if total < 10 {
		t.Fatalf("README.md and docs/ have %d Go blocks; the parser must have missed some", total)
	}
}

// sourceImporter returns a file set and an importer that type-checks the
// packages a block imports from their source, the standard library's
// included, shared by the tests so that each package is checked once. It
// turns cgo off in build.Default, so that no C toolchain is needed.
var sourceImporter = sync.OnceValues(func() (*token.FileSet, types.Importer) {
	build.Default.CgoEnabled = false
	fset := token.NewFileSet()
	return fset, importer.ForCompiler(fset, "source", nil)
})

// typeCheck parses and type-checks the file src and returns its errors,
// but for variables declared and not used.
func typeCheck(fset *token.FileSet, imp types.Importer, src string) []error {
	f, err := parser.ParseFile(fset, "readme_block.go", src, parser.ParseComments)
	if err != nil {
		return []error{err}
	}
	var errs []error
	conf := types.Config{Importer: imp, Error: func(err error) {
		if te, ok := err.(types.Error); ok && te.Soft && strings.Contains(te.Msg, "declared and not used") {
			return
		}
		errs = append(errs, err)
	}}
	conf.Check("readme", fset, []*ast.File{f}, nil)
	return errs
}

// wrapBlock makes a Go file of b: as it is if it is one, else its
// declarations or, failing that, a function whose body it is, with the
// imports it needs. A //line comment keeps the positions of errors those
// of file, the Markdown file it comes from.
func wrapBlock(file string, b codeBlock) (string, error) {
	if strings.HasPrefix(b.code, "package ") {
		return b.code, nil
	}
	fset := token.NewFileSet()
	lineDirective := fmt.Sprintf("//line %s:%d\n", file, b.line)
	body := "package readme\n\n" + lineDirective + b.code
	f, err := parser.ParseFile(fset, "", body, 0)
	if err != nil {
		body = "package readme\n\nfunc _() {\n" + lineDirective + b.code + "}\n"
		if f, err = parser.ParseFile(fset, "", body, 0); err != nil {
			return "", err
		}
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && readmeImports[id.Name] != "" && !slices.Contains(names, id.Name) {
				names = append(names, id.Name)
			}
		}
		return true
	})
	slices.Sort(names)
	var imports strings.Builder
	for _, name := range names {
		fmt.Fprintf(&imports, "import %s %q\n", name, readmeImports[name])
	}
	return strings.Replace(body, "package readme\n\n", "package readme\n\n"+imports.String()+"\n", 1), nil
}

// TestREADMEBlocksFailWhenBroken makes sure the check above can fail: a
// block that calls an option that does not exist, or that is missing a
// brace, is refused.
func TestREADMEBlocksFailWhenBroken(t *testing.T) {
	fset, imp := sourceImporter()
	for _, code := range []string{
		"rt := retry.New(nil, retry.WithMaxRetries(5))\n",
		"client := &http.Client{Transport: retry.New(nil)\n",
		"var d time.Duration = retry.DefaultMaxAttempts * \"s\"\n",
	} {
		src, err := wrapBlock("README.md", codeBlock{line: 1, code: code})
		if err != nil {
			continue // refused by the parser: good
		}
		if errs := typeCheck(fset, imp, src); len(errs) == 0 {
			t.Errorf("the broken block %q type-checks", code)
		}
	}
}
