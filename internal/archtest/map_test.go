package archtest

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mapPackages reads the parts table of the map (docs/ARCHITECTURE.md, "### Parts"): for
// each package its packages column names, the parts naming it. A name is a backticked
// import path relative to the module (`fathom` is the module's root package); text in
// parentheses is a comment.
func mapPackages(doc []byte) map[string][]string {
	comment := regexp.MustCompile(`\([^)]*\)`)
	name := regexp.MustCompile("`([^`]+)`")
	named := map[string][]string{}
	inParts := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			inParts = line == "### Parts"
			continue
		case !inParts || !strings.HasPrefix(line, "| "):
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || cells[1] == "packages" || strings.HasPrefix(cells[1], "---") {
			continue
		}
		part := strings.TrimPrefix(cells[0], "| ")
		for _, m := range name.FindAllStringSubmatch(comment.ReplaceAllString(cells[1], ""), -1) {
			path := module + "/" + m[1]
			if m[1] == "fathom" {
				path = module
			}
			named[path] = append(named[path], part)
		}
	}
	return named
}

// TestMapNamesEveryPackage: the map's parts table names every package of the module,
// each in one part, and nothing that is no package; a new package is added to the map
// in the change that adds it.
func TestMapNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	named := mapPackages(doc)
	if len(named) == 0 {
		t.Fatal(`docs/ARCHITECTURE.md has no "### Parts" table naming packages`)
	}
	pkgs := strings.Fields(string(goList(t, "./...")))
	for _, p := range pkgs {
		short := strings.TrimPrefix(p, module+"/")
		switch parts := named[p]; len(parts) {
		case 0:
			t.Errorf("the map (docs/ARCHITECTURE.md, Parts) names no part for %s: add it to its part's row", short)
		case 1:
		default:
			t.Errorf("the map names %s in %d parts (%s): name it in one", short, len(parts), strings.Join(parts, ", "))
		}
	}
	for p, parts := range named {
		if !slices.Contains(pkgs, p) {
			t.Errorf("the map's part %q names %s, which is no package of the module", parts[0], strings.TrimPrefix(p, module+"/"))
		}
	}
}

// TestMapPackagesReadsTheTable: the reader of the parts table takes the packages column
// only, skips comments in parentheses and the header, and stops at the next heading.
func TestMapPackagesReadsTheTable(t *testing.T) {
	doc := []byte("## The map\n\n### Parts\n\n| part | packages | owns |\n| --- | --- | --- |\n" +
		"| live | `live` (the vocabulary: `Update`), `live/feed` | `messages` too |\n" +
		"| public | `fathom` (the module root) | x |\n\n### Import rules\n\n| a | `gateway` | b |\n")
	got := mapPackages(doc)
	want := map[string][]string{module + "/live": {"live"}, module + "/live/feed": {"live"}, module: {"public"}}
	if len(got) != len(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for p, parts := range want {
		if !slices.Equal(got[p], parts) {
			t.Errorf("read %s in %v, want %v", p, got[p], parts)
		}
	}
}
