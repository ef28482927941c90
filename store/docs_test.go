package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestArchitectureCountsInterfaces: docs/architecture.md's "Stores" says
// how many interfaces package store has and names each; both stay true.
func TestArchitectureCountsInterfaces(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.IsExported() {
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						names = append(names, ts.Name.Name)
					}
				}
			}
		}
	}
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`The store is (\d+) interfaces`).FindSubmatch(doc)
	if m == nil {
		t.Fatal(`docs/architecture.md no longer says "The store is N interfaces"`)
	}
	if n, _ := strconv.Atoi(string(m[1])); n != len(names) {
		t.Errorf("docs/architecture.md says %d interfaces; package store has %d: %v", n, len(names), names)
	}
	section := string(doc[strings.Index(string(doc), "The store is "):])
	section = section[:strings.Index(section, "**Rules up")]
	for _, name := range names {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/architecture.md's Stores section does not name %s", name)
		}
	}
}
