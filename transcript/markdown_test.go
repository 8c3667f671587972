package transcript_test

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/transcript"
)

// TestMarkdownDropsRawHTML: raw HTML in model text never reaches the page, as a block
// or inline, whatever its case.
func TestMarkdownDropsRawHTML(t *testing.T) {
	for _, src := range []string{
		"<script>alert(1)</script>",
		"hello <script>alert(1)</script> world",
		"<SCRIPT SRC=x></SCRIPT>",
		"<img src=x onerror=alert(1)>",
		"text <iframe src=\"https://evil\"></iframe>",
		"<div onclick=\"alert(1)\">click</div>",
	} {
		out := transcript.Markdown(src)
		low := strings.ToLower(out)
		for _, bad := range []string{"<script", "<img", "<iframe", "onerror", "onclick", "<div"} {
			if strings.Contains(low, bad) {
				t.Errorf("Markdown(%q) = %q: has %s", src, out, bad)
			}
		}
	}
}

// TestMarkdownDropsDangerousLinks: a link or image to javascript:, data:, vbscript: or
// file: (however spelt) is no link at all, only its text; http(s), mailto and relative
// links are links.
func TestMarkdownDropsDangerousLinks(t *testing.T) {
	for _, src := range []string{
		"[click](javascript:alert(1))",
		"[click](JavaScript:alert(1))",
		"[click]( javascript:alert(1) )",
		"[click](&#106;avascript:alert(1))",
		"[click](java%0ascript:alert(1))",
		"[click](<javascript:alert(1)>)",
		"[click](vbscript:msgbox(1))",
		"[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
		"[click](file:///etc/passwd)",
		"<javascript:alert(1)>",
		"![x](javascript:alert(1))",
		"[ref][r]\n\n[r]: javascript:alert(1)",
	} {
		out := strings.ToLower(transcript.Markdown(src))
		if strings.Contains(out, "<a ") || strings.Contains(out, "<img") {
			t.Errorf("Markdown(%q) = %q: still a link or an image", src, out)
		}
		if strings.Contains(out, "javascript:") && strings.Contains(out, "href=\"javascript") ||
			strings.Contains(out, "href=\"vbscript") || strings.Contains(out, "href=\"data:") || strings.Contains(out, "href=\"file:") ||
			strings.Contains(out, "src=\"javascript") || strings.Contains(out, "href=\"&#") || strings.Contains(out, "href=\"java") {
			t.Errorf("Markdown(%q) = %q: a live dangerous link", src, out)
		}
	}
	for src, want := range map[string]string{
		"[docs](https://example.com/a?b=1)": `href="https://example.com/a?b=1"`,
		"[mail](mailto:a@example.com)":      `href="mailto:a@example.com"`,
		"[rel](/v1/sessions/x)":             `href="/v1/sessions/x"`,
		"see https://example.com/x":         `href="https://example.com/x"`,
	} {
		if out := transcript.Markdown(src); !strings.Contains(out, want) {
			t.Errorf("Markdown(%q) = %q: want %s", src, out, want)
		}
	}
}

// TestMarkdownRendersHeadingsAndHighlightsCode: markdown structure is rendered and a
// fenced block's code is highlighted with chroma classes that CodeCSS styles.
func TestMarkdownRendersHeadingsAndHighlightsCode(t *testing.T) {
	out := transcript.Markdown("# Report\n\nSome *text*.\n\n```go\nfunc main() { fmt.Println(\"<hi>\") }\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
	for _, want := range []string{"<h1", "Report</h1>", "<em>text</em>", `class="chroma"`, `<span class="kd">func</span>`, "&lt;hi&gt;", "<table>"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered markdown lacks %q:\n%s", want, out)
		}
	}
	if css := transcript.CodeCSS(); !strings.Contains(css, ".chroma") || !strings.Contains(css, ".kd") {
		t.Errorf("CodeCSS: %.200q", css)
	}
	// A block without a language is highlighted by guess or shown escaped; never raw.
	if out := transcript.Markdown("```\n<script>alert(1)</script>\n```"); strings.Contains(out, "<script") {
		t.Errorf("unlabelled code block: %q", out)
	}
}
