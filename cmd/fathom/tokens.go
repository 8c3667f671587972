package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fathom-agents/fathom/memory"
)

// runTokens prints the token count of a file or of standard input, with the encoding of
// --model (or --encoding). It never touches the network: the BPE files are compiled in.
// For a model without a public tokenizer (Claude, local models) the count is an
// estimate, and it says so on stderr.
func runTokens(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokens", "[--model M | --encoding E] [-v] [FILE|-]", stderr)
	model := fs.String("model", envOr("FATHOM_MODEL", "gpt-4o"), "model whose encoding to use (env FATHOM_MODEL)")
	encoding := fs.String("encoding", "", "encoding to use instead of the model's: o200k_base, cl100k_base, p50k_base, r50k_base")
	verbose := fs.Bool("v", false, "also print the encoding")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageError("at most one FILE")
	}
	var in io.Reader = os.Stdin
	name := "-"
	if len(pos) == 1 && pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, pos[0]
	}
	text, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	var tok *memory.Tokenizer
	if *encoding != "" {
		tok, err = memory.GetTokenizer(*encoding)
	} else {
		tok, err = memory.TokenizerForModel(*model, "")
	}
	if err != nil {
		return usageError("%v", err)
	}
	n := tok.Count(string(text))
	if _, known := memory.EncodingForModel(*model); *encoding == "" && !known {
		fmt.Fprintf(stderr, "fathom tokens: %s has no public tokenizer: %d is an estimate with %s", *model, n, tok.Name())
		if strings.HasPrefix(strings.ToLower(*model), "claude") {
			fmt.Fprint(stderr, " (Claude counts differently; the Messages API's count_tokens gives the exact figure)")
		}
		fmt.Fprintln(stderr)
	}
	if *verbose {
		fmt.Fprintf(stdout, "%d tokens (%s)\n", n, tok.Name())
		return nil
	}
	fmt.Fprintln(stdout, n)
	return nil
}
