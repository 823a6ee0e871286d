package architecture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ingot-dev/ingot"

// pkg is what `go list -export -deps -json` says of a package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Export     string
	Module     *struct{ Path string }
}

// listModule lists every package of the module and its dependencies, with
// the export data the compiler wrote for each.
func listModule(t *testing.T) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", module+"/...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = &p
	}
	return pkgs
}

func inModule(p *pkg) bool { return p.Module != nil && p.Module.Path == module }

// importRules say which packages a package must not import, directly.
var importRules = []struct {
	from string
	bad  func(imp string) bool
	why  string
}{
	{"cmd/ingot", isEngineOrBackend, "the CLI is a client of a running server (offline admin: pkg/store and pkg/store/backends only)"},
	{"pkg/lab", isEngineOrBackend, "the lab drives ingot as an operator does, through its API"},
	{"pkg/apiserver", isStore, "API handlers call pkg/fleet and pkg/engine, never the store"},
	{"pkg/client", isCore, "the API client speaks the wire types only"},
}

func isEngineOrBackend(imp string) bool {
	if imp == module+"/pkg/engine" || strings.HasPrefix(imp, module+"/pkg/engine/") {
		return true
	}
	return strings.HasPrefix(imp, module+"/pkg/store/") && imp != module+"/pkg/store/backends"
}

func isStore(imp string) bool {
	return imp == module+"/pkg/store" || strings.HasPrefix(imp, module+"/pkg/store/")
}

func isCore(imp string) bool {
	return isStore(imp) || isEngineOrBackend(imp) || imp == module+"/pkg/fleet"
}

func TestImports(t *testing.T) {
	pkgs := listModule(t)
	checked := 0
	for _, r := range importRules {
		p := pkgs[module+"/"+r.from]
		if p == nil {
			t.Errorf("package %s is gone: update the rule (%s)", r.from, r.why)
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if r.bad(imp) {
				t.Errorf("%s imports %s: %s", r.from, strings.TrimPrefix(imp, module+"/"), r.why)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package checked")
	}
}

// machineWrites are the store methods that write a machine record or its
// history: only pkg/fleet calls them.
var machineWrites = []string{"CreateMachine", "ChangeMachine", "DeleteMachine", "PutInventory", "AppendEvent"}

// TestOneWriterOfMachines type-checks every package of the module (its
// non-test files) and reports each call of a machine-writing method that
// a store declares (the contract's interfaces, a backend's types) made
// outside pkg/fleet and the store's own packages.
func TestOneWriterOfMachines(t *testing.T) {
	pkgs := listModule(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p := pkgs[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})
	calls := 0
	for _, p := range pkgs {
		if !inModule(p) || len(p.GoFiles) == 0 {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp, Error: func(error) {}}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-checking %s: %v", p.ImportPath, err)
		}
		for sel, s := range info.Selections {
			fn, ok := s.Obj().(*types.Func)
			if !ok || fn.Pkg() == nil || !slices.Contains(machineWrites, fn.Name()) || !isStore(fn.Pkg().Path()) {
				continue
			}
			calls++
			if p.ImportPath == module+"/pkg/fleet" || isStore(p.ImportPath) {
				continue
			}
			t.Errorf("%s: %s calls the store's %s: only pkg/fleet writes machines (ask it)", fset.Position(sel.Pos()),
				strings.TrimPrefix(p.ImportPath, module+"/"), fn.Name())
		}
	}
	if calls == 0 {
		t.Fatal("found no call of a machine-writing method at all: the check looks at nothing")
	}
}
