package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Every edit must match the source once, and the source it makes must
// build, or the tool fails on a mechanism the code has moved away from
// (as the noise row did once keyState became State): the list must
// follow the code. Each mechanism's edits are built as an overlay of
// internal/pacecore, without copying the repository.
func TestEditsMatchTheSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds internal/pacecore once per mechanism")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range mechanisms {
		if names[m.name] {
			t.Errorf("%s: named twice", m.name)
		}
		names[m.name] = true
		if len(m.edits) == 0 {
			t.Errorf("%s: no edit", m.name)
		}
		edited := map[string][]byte{}
		for _, e := range m.edits {
			p := filepath.Join(root, "internal", "pacecore", e.file)
			src, ok := edited[p]
			if !ok {
				if src, err = os.ReadFile(p); err != nil {
					t.Fatal(err)
				}
			}
			if n := bytes.Count(src, []byte(e.old)); n != 1 {
				t.Errorf("%s: %d matches in internal/pacecore/%s of %q; want 1", m.name, n, e.file, e.old)
				continue
			}
			if e.old == e.new {
				t.Errorf("%s: an edit of internal/pacecore/%s changes nothing", m.name, e.file)
			}
			edited[p] = bytes.Replace(src, []byte(e.old), []byte(e.new), 1)
		}
		overlay := map[string]map[string]string{"Replace": {}}
		for p, src := range edited {
			f := filepath.Join(t.TempDir(), filepath.Base(p))
			if err := os.WriteFile(f, src, 0o644); err != nil {
				t.Fatal(err)
			}
			overlay["Replace"][p] = f
		}
		js, err := json.Marshal(overlay)
		if err != nil {
			t.Fatal(err)
		}
		o := filepath.Join(t.TempDir(), "overlay.json")
		if err := os.WriteFile(o, js, 0o644); err != nil {
			t.Fatal(err)
		}
		build := exec.Command("go", "build", "-overlay", o, "./internal/pacecore")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Errorf("%s: the edited source does not build: %v\n%s", m.name, err, out)
		}
	}
}
