package caddymcp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bounds of TestCodeReadsInSmallPieces: the lines of a non-test Go
// file, and the lines of a function's body between its braces.
const (
	maxFileLines = 400
	maxBodyLines = 60
)

// The code reads in small pieces: no Go file of the module outside its
// tests is over maxFileLines lines, and no function's body over
// maxBodyLines, so a file holds one concern and a function one step.
func TestCodeReadsInSmallPieces(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && skipSizeDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			assert.Failf(t, "file too long", "%s: %d lines, over %d: split it along its concerns", path, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			body := fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Body.Lbrace).Line - 1
			if body > maxBodyLines {
				assert.Failf(t, "function too long", "%s:%d: %s has %d body lines, over %d: name its steps",
					path, fset.Position(fn.Pos()).Line, funcName(fn), body, maxBodyLines)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Positive(t, files, "the walk found the module's Go files")
}

// skipSizeDir tells whether the walk leaves out a directory: one hidden,
// of JavaScript dependencies, or of test data.
func skipSizeDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata"
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if index, ok := typ.(*ast.IndexExpr); ok {
		typ = index.X
	}
	if index, ok := typ.(*ast.IndexListExpr); ok {
		typ = index.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
