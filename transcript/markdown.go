package transcript

import (
	"bufio"
	"bytes"
	"html"
	"net/url"
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// codeStyle is the chroma style of highlighted code (CodeCSS).
const codeStyle = "github"

// md is the one markdown converter: CommonMark with GitHub's tables, strikethrough,
// autolinks and task lists; goldmark's default renderer, which drops raw HTML; links
// filtered by safeLinks; fenced code through highlighter.
var md = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(safeLinks{}, 100))),
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(highlighter{}, 100))),
)

// Markdown renders markdown text to HTML safe to put in a page: raw HTML in the text is
// omitted (goldmark's default), a link or image whose destination is not http, https,
// mailto or relative is shown as its text only, and fenced code blocks are highlighted with
// chroma's CSS classes (CodeCSS styles them).
func Markdown(src string) string {
	var buf bytes.Buffer
	if err := md.Convert([]byte(src), &buf); err != nil {
		// goldmark reports only the writer's errors, and a bytes.Buffer has none; show the
		// text as text should it ever happen.
		return "<pre>" + escape(src) + "</pre>"
	}
	return buf.String()
}

// safeLinks turns every link and image whose destination is not one a reader can follow
// safely (javascript:, data:, vbscript:, file:, anything unknown) into its text: no
// anchor, no image is rendered for it. goldmark's renderer refuses a few schemes itself
// (leaving an empty href); this is the allowlist on top.
type safeLinks struct{}

func (safeLinks) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	src := reader.Source()
	var unsafe []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch l := n.(type) {
		case *ast.Link:
			if !safeURL(string(l.Destination)) {
				unsafe = append(unsafe, n)
			}
		case *ast.Image:
			if !safeURL(string(l.Destination)) {
				unsafe = append(unsafe, n)
			}
		case *ast.AutoLink:
			if l.AutoLinkType == ast.AutoLinkURL && !safeURL(string(l.URL(src))) {
				unsafe = append(unsafe, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, n := range unsafe {
		parent := n.Parent()
		if l, ok := n.(*ast.AutoLink); ok {
			parent.ReplaceChild(parent, n, ast.NewString(l.Label(src)))
			continue
		}
		for c := n.FirstChild(); c != nil; { // the link's text (an image's: its alt text) stays
			next := c.NextSibling()
			parent.InsertBefore(parent, n, c)
			c = next
		}
		parent.RemoveChild(parent, n)
	}
}

// safeURL reports whether a link destination is http(s), mailto or relative (no scheme).
func safeURL(dest string) bool {
	dest = strings.TrimSpace(html.UnescapeString(dest)) // the renderer decodes entities
	if dest == "" {
		return true
	}
	u, err := url.Parse(dest)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "", "http", "https", "mailto":
		return true
	}
	return false
}

// highlighter renders fenced code blocks with chroma (CSS classes, no inline styles).
type highlighter struct{}

func (highlighter) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindFencedCodeBlock, renderFenced)
}

var formatter = chromahtml.New(chromahtml.WithClasses(true), chromahtml.PreventSurroundingPre(false))

func renderFenced(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	fb := n.(*ast.FencedCodeBlock)
	var code bytes.Buffer
	lines := fb.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		code.Write(seg.Value(src))
	}
	lang := string(fb.Language(src))
	var lexer chroma.Lexer
	if lang != "" {
		lexer = lexers.Get(lang)
	}
	if lexer == nil {
		lexer = lexers.Analyse(code.String())
	}
	writeCode(w, code.String(), lang, lexer)
	return ast.WalkSkipChildren, nil
}

// writeCode writes code highlighted by lexer (nil, or a failure: as escaped text).
func writeCode(w util.BufWriter, code, lang string, lexer chroma.Lexer) {
	if lexer != nil {
		if it, err := chroma.Coalesce(lexer).Tokenise(nil, code); err == nil {
			_, _ = w.WriteString(`<div class="code" data-lang="` + escape(lang) + `">`)
			if err := formatter.Format(w, styles.Get(codeStyle), it); err == nil {
				_, _ = w.WriteString("</div>\n")
				return
			}
			_, _ = w.WriteString("</div>\n")
		}
	}
	_, _ = w.WriteString(`<pre class="chroma"><code>`)
	_, _ = w.WriteString(escape(code))
	_, _ = w.WriteString("</code></pre>\n")
}

// CodeLexer reports whether filename names source code Code highlights (by its
// extension or name; plain text is not code).
func CodeLexer(filename string) bool {
	l := lexers.Match(filename)
	return l != nil && l.Config().Name != "plaintext"
}

// Code renders the source text of file filename as HTML safe to put in a page,
// highlighted as fenced code is in Markdown (chroma's CSS classes; the lexer chosen by
// the file name, plain escaped text when none matches).
func Code(src, filename string) string {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	lexer := lexers.Match(filename)
	lang := ""
	if lexer != nil {
		lang = strings.ToLower(lexer.Config().Name)
	}
	writeCode(w, src, lang, lexer)
	_ = w.Flush() // a bytes.Buffer takes every write
	return buf.String()
}

var codeCSS = sync.OnceValue(func() string {
	var buf bytes.Buffer
	if err := formatter.WriteCSS(&buf, styles.Get(codeStyle)); err != nil {
		return ""
	}
	return buf.String()
})

// CodeCSS is the stylesheet of the highlighted code Markdown renders (chroma's
// "github" style, by class).
func CodeCSS() string { return codeCSS() }

func escape(s string) string { return html.EscapeString(s) }
