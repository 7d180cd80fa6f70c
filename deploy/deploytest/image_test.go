package deploytest

import (
	"debug/elf"
	"strings"
	"testing"
)

// The image's base has no libc: the binary the Dockerfile builds must need no dynamic loader and no shared
// library, and it must run.
func TestImageBinaryIsStatic(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary names an interpreter (a dynamic loader, from libc); build it with CGO_ENABLED=0")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Fatal(err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v; the distroless static base has none", libs)
	}
	out := run(t, binary, "--version")
	if !strings.HasPrefix(out, "postbox deploytest ") {
		t.Errorf("postbox --version printed %q, want the version set by the Dockerfile's -ldflags (deploytest)", out)
	}
}
