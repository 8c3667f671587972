package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckTreeRefusesBinariesAndLargeFiles runs scripts/check-tree.sh (the check `.ci/run`
// starts with) on throwaway git repositories: it passes a tree of source files and fails,
// naming the path, on a tracked file over 1 MiB and on a tracked compiled binary whatever
// its name and mode.
func TestCheckTreeRefusesBinariesAndLargeFiles(t *testing.T) {
	script, err := filepath.Abs("../../scripts/check-tree.sh")
	if err != nil {
		t.Fatal(err)
	}
	elf := append([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1}, make([]byte, 64)...)
	cases := []struct {
		name    string
		files   map[string][]byte
		wantErr string // "" when the check must pass
	}{
		{"source only", map[string][]byte{"main.go": []byte("package main\n"), "README.md": []byte("MZ is a text file too\n")}, ""},
		{"exactly 1 MiB", map[string][]byte{"data.txt": bytes.Repeat([]byte("a"), 1<<20)}, ""},
		{"over 1 MiB", map[string][]byte{"big.txt": bytes.Repeat([]byte("a"), 1<<20+1)}, "big.txt is 1048577 bytes"},
		{"ELF binary without a suffix", map[string][]byte{"examples/client/client": elf}, "examples/client/client is an ELF executable"},
		{"PE binary", map[string][]byte{"tool.dat": append([]byte("MZ\x90\x00"), make([]byte, 32)...)}, "tool.dat is a PE (Windows) executable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			git("init", "-q")
			for name, body := range c.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git("add", "-A")
			out, err := exec.Command("bash", script, dir).CombinedOutput()
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("check refused a clean tree: %v\n%s", err, out)
			case c.wantErr != "" && err == nil:
				t.Fatalf("check passed a tree holding %v; want an error naming it", c.files)
			case c.wantErr != "" && !strings.Contains(string(out), c.wantErr):
				t.Fatalf("check output does not say %q:\n%s", c.wantErr, out)
			}
		})
	}
}
