package sandboxd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// runtime is how one language runs: the interpreter and the file the code is written to.
type runtime struct {
	lang fsp.Language
	// interp is the interpreter's absolute path.
	interp string
	// file is the source file's name, e.g. main.py.
	file string
	// args are the interpreter's arguments before the source file.
	args []string
	// asHeadroom is added to the memory limit to form RLIMIT_AS: runtimes reserve address
	// space they never touch (V8 reserves far more than it maps), so memory is bounded by
	// RLIMIT_DATA and the address space only as a backstop.
	asHeadroom uint64
}

// argv returns the command that runs src (the source file's path as the child sees it).
func (r runtime) argv(src string) []string {
	a := append([]string{r.interp}, r.args...)
	return append(a, src)
}

// languageDefaults lists, per language, the interpreters tried in order (system paths
// first: a per-slot uid must be able to read them, which rules out e.g. ~root/.pyenv),
// the source file name and the interpreter arguments.
var languageDefaults = []struct {
	lang       fsp.Language
	candidates []string
	file       string
	args       []string
	asHeadroom uint64
}{
	{fsp.LangPython, []string{"/usr/bin/python3", "/usr/local/bin/python3", "python3"}, "main.py", []string{"-u"}, 512 << 20},
	{fsp.LangJavaScript, []string{"/usr/bin/node", "/usr/local/bin/node", "node", "nodejs"}, "main.js", nil, 2 << 30},
	{fsp.LangShell, []string{"/bin/bash", "/usr/bin/bash", "/bin/sh", "bash", "sh"}, "main.sh", nil, 512 << 20},
	{fsp.LangElixir, []string{"/usr/bin/elixir", "/usr/local/bin/elixir", "elixir"}, "main.exs", nil, 2 << 30},
}

// findRuntimes resolves the interpreter of every language that has one; the map holds
// only languages found. overrides replace the candidates of their language.
func findRuntimes(overrides map[fsp.Language]string) (map[fsp.Language]runtime, error) {
	out := map[fsp.Language]runtime{}
	for _, d := range languageDefaults {
		cands := d.candidates
		if o, ok := overrides[d.lang]; ok {
			cands = []string{o}
		}
		for _, c := range cands {
			p, err := lookExecutable(c)
			if err != nil {
				continue
			}
			out[d.lang] = runtime{lang: d.lang, interp: p, file: d.file, args: d.args, asHeadroom: d.asHeadroom}
			break
		}
		if _, ok := out[d.lang]; !ok && overrides[d.lang] != "" {
			return nil, fmt.Errorf("interpreter %q for %s not found", overrides[d.lang], d.lang)
		}
	}
	return out, nil
}

// lookExecutable returns the absolute path of an executable given as a path or a name on
// PATH.
func lookExecutable(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", name, err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("absolute path of %s: %w", name, err)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("stat %s: %w", p, err)
	}
	return p, nil
}

// probeCode is a program that prints "ok" in each language, run once per language at
// start-up to check that it works under the chosen isolation.
var probeCode = map[fsp.Language]string{
	fsp.LangPython:     "print('ok')",
	fsp.LangJavaScript: "console.log('ok')",
	fsp.LangShell:      "echo ok",
	fsp.LangElixir:     "IO.puts(\"ok\")",
}
