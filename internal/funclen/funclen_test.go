// Package funclen holds a test that keeps every production function of the
// repository at or under maxLines lines (issue 22).
package funclen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a function may be, counted from the line of its
// func keyword to the line of its closing brace, both included.
const maxLines = 80

// skipDirs are generated code, the store conformance suite and fixtures,
// relative to the repository root; any directory named testdata is skipped
// too.
var skipDirs = map[string]bool{
	"gen":             true,
	"store/storetest": true,
}

// skipDirNames are directory names skipped wherever they appear.
var skipDirNames = map[string]bool{
	"testdata":     true,
	"dbsqlc":       true,
	"dbsqlite":     true,
	"node_modules": true,
}

// TestNoLongFunctions walks every non-test, non-generated .go file of the
// repository and fails naming each function longer than maxLines.
func TestNoLongFunctions(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skip(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		checked++
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxLines {
				t.Errorf("%s: %s is %d lines; split it to %d or fewer", rel, funcName(fn), n, maxLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go file checked; is the repository root ../..?")
	}
}

func skip(rel, name string) bool {
	if rel == "." {
		return false
	}
	if strings.HasPrefix(name, ".") || skipDirNames[name] || skipDirs[rel] {
		return true
	}
	return false
}

// funcName is fn's name, with its receiver type when it is a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
