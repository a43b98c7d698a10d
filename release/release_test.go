package release

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

const rootPath = "github.com/backoff-jitter/retry"

// installable are the nested modules a user may require, by directory
// under the repository's root.
var installable = []string{"otelretry", "redispace"}

// TestRequiresARealVersion: a nested module's go.mod must require the
// root (and any other module of this repository) at a release version: a
// placeholder such as v0.0.0-00010101000000-000000000000 is served by no
// proxy, and the replace that hides it locally is ignored for dependents.
func TestRequiresARealVersion(t *testing.T) {
	repo := repoRoot(t)
	for _, dir := range installable {
		f := parseModFile(t, filepath.Join(repo, dir, "go.mod"))
		found := false
		for _, r := range f.Require {
			if !strings.HasPrefix(r.Mod.Path, rootPath) {
				continue
			}
			found = found || r.Mod.Path == rootPath
			v := r.Mod.Version
			if !semver.IsValid(v) || module.IsPseudoVersion(v) || semver.Prerelease(v) != "" {
				t.Errorf("%s/go.mod requires %s %s; want a release version (vX.Y.Z)", dir, r.Mod.Path, v)
			}
		}
		if !found {
			t.Errorf("%s/go.mod does not require %s", dir, rootPath)
		}
	}
}

// TestInstallAlone installs every installable module into a new module,
// through a module proxy that serves this working tree at the versions
// the go.mod files require, and builds it.
func TestInstallAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go get and go build in a new module")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	repo := repoRoot(t)

	// The version to serve: the one the nested modules require of the
	// root. The nested modules are tagged at it too (docs/release.md).
	version := ""
	for _, dir := range installable {
		for _, r := range parseModFile(t, filepath.Join(repo, dir, "go.mod")).Require {
			if r.Mod.Path == rootPath {
				if version != "" && r.Mod.Version != version {
					t.Fatalf("the nested modules require %s at %s and %s; want one version", rootPath, version, r.Mod.Version)
				}
				version = r.Mod.Version
			}
		}
	}
	if version == "" {
		t.Fatalf("no installable module requires %s", rootPath)
	}

	proxy := t.TempDir()
	serve(t, proxy, repo, rootPath, version)
	imports := []string{rootPath}
	for _, dir := range installable {
		path := rootPath + "/" + dir
		serve(t, proxy, filepath.Join(repo, dir), path, version)
		imports = append(imports, path)
	}

	user := t.TempDir()
	write(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26.0\n")
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	write(t, filepath.Join(user, "main.go"), src.String())

	// Modules other than this repository's come from the module cache's
	// download directory, which is itself a proxy, then from GOPROXY. A
	// module cache of the test's own keeps the served versions out of the
	// user's cache, where a stale copy would outlive this run.
	cache := strings.TrimSpace(run(t, repo, nil, goTool, "env", "GOMODCACHE"))
	upstream := strings.TrimSpace(run(t, repo, nil, goTool, "env", "GOPROXY"))
	env := []string{
		"GOWORK=off",
		"GOFLAGS=-modcacherw -buildvcs=false",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "mod"),
		"GOPROXY=" + fileURL(proxy) + "," + fileURL(filepath.Join(cache, "cache", "download")) + "," + upstream,
		"GOSUMDB=off", // the served zips are this tree's, not a release's
	}
	var gets []string
	for _, p := range imports[1:] {
		gets = append(gets, p+"@"+version)
	}
	run(t, user, env, goTool, append([]string{"get"}, gets...)...)
	run(t, user, env, goTool, "build", "./...")
	if got := strings.TrimSpace(run(t, user, env, goTool, "list", "-m", "-f", "{{.Version}}", rootPath)); got != version {
		t.Errorf("the new module got %s %s; want %s", rootPath, got, version)
	}
}

// serve puts the module in dir at version into the file-system proxy.
func serve(t *testing.T, proxy, dir, path, version string) {
	t.Helper()
	escaped, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, "list"), version+"\n")
	write(t, filepath.Join(at, version+".info"), string(info))
	write(t, filepath.Join(at, version+".mod"), string(mod))
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	// CreateFromDir leaves out nested modules, as a proxy's zip does.
	if err := zip.CreateFromDir(z, module.Version{Path: path, Version: version}, dir); err != nil {
		t.Fatalf("zip of %s: %v", path, err)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

func parseModFile(t *testing.T, name string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// run runs a go command in dir with env added to the test's environment
// and returns its output; it fails the test, with the output, on error.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}
